//! Reading a pasted public key: one OpenSSH line (`ssh-ed25519 AAAA… comment`),
//! checked against what the SSH gateway accepts. Every refusal says why, in
//! words the person pasting can act on.

use ssh_key::{public::KeyData, Algorithm, EcdsaCurve, HashAlg, PublicKey};

/// Largest paste read at all: an RSA 16384-bit key's line is under 3 KB, so
/// anything past this is not a public key.
pub const MAX_INPUT: usize = 16 * 1024;
/// RSA keys shorter than this are refused (NIST: 2048-bit RSA is not to be
/// relied on past 2030).
pub const MIN_RSA_BITS: usize = 3072;
/// Longest key name kept.
pub const MAX_NAME: usize = 100;

/// A key that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedKey {
    /// "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa".
    pub algorithm: String,
    pub bits: i64,
    /// "SHA256:…", as `ssh-keygen -lf` prints it.
    pub fingerprint: String,
    /// The key's line without its comment.
    pub openssh: String,
    /// The line's comment ("alice@laptop"), the default name.
    pub comment: String,
}

/// Parses and checks one pasted public key.
pub fn parse(text: &str) -> Result<ParsedKey, String> {
    if text.len() > MAX_INPUT {
        return Err(format!(
            "that is {} KB; a public key is one line of at most a few KB (paste the contents of the .pub file)",
            text.len() / 1024
        ));
    }
    let text = text.trim();
    if text.is_empty() {
        return Err("paste a public key (the contents of ~/.ssh/id_ed25519.pub or similar)".into());
    }
    if text.contains("PRIVATE KEY") {
        return Err("that is a private key: never share it; paste the public key (the .pub file) instead".into());
    }
    if text.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        return Err("paste one key at a time (one line)".into());
    }
    let key = PublicKey::from_openssh(text)
        .map_err(|e| format!("not an OpenSSH public key ({e}); it looks like `ssh-ed25519 AAAAC3… you@host`"))?;
    let bits = check_kind(&key)?;
    let mut bare = key.clone();
    bare.set_comment("");
    let openssh = bare.to_openssh().map_err(|e| format!("the key could not be encoded again: {e}"))?;
    Ok(ParsedKey {
        algorithm: key.algorithm().as_str().to_string(),
        bits,
        fingerprint: key.fingerprint(HashAlg::Sha256).to_string(),
        openssh: openssh.trim().to_string(),
        comment: key.comment().to_string(),
    })
}

/// The key types the gateway takes, and their size in bits.
fn check_kind(key: &PublicKey) -> Result<i64, String> {
    match key.key_data() {
        KeyData::Ed25519(_) => Ok(256),
        KeyData::Ecdsa(k) => Ok(match k.curve() {
            EcdsaCurve::NistP256 => 256,
            EcdsaCurve::NistP384 => 384,
            EcdsaCurve::NistP521 => 521,
        }),
        KeyData::Rsa(k) => {
            let modulus = k.n.as_positive_bytes().unwrap_or_default();
            let bits = significant_bits(modulus);
            if bits < MIN_RSA_BITS {
                return Err(format!(
                    "this RSA key has {bits} bits; RSA keys need at least {MIN_RSA_BITS} (or use ed25519: ssh-keygen -t ed25519)"
                ));
            }
            Ok(bits as i64)
        }
        _ => Err(match key.algorithm() {
            Algorithm::Dsa => {
                "DSA keys are not accepted (broken since 2015); use ed25519: ssh-keygen -t ed25519".into()
            }
            other => format!(
                "{} keys are not accepted; use ed25519, ecdsa or rsa (at least {MIN_RSA_BITS} bits)",
                other.as_str()
            ),
        }),
    }
}

fn significant_bits(be: &[u8]) -> usize {
    let skip = be.iter().take_while(|b| **b == 0).count();
    match be.get(skip) {
        Some(first) => (be.len() - skip) * 8 - first.leading_zeros() as usize,
        None => 0,
    }
}

/// The name a key is listed under: the one given, else the key's comment,
/// else its type; refused when too long or holding control characters.
pub fn key_name(given: &str, parsed: &ParsedKey) -> Result<String, String> {
    let name = given.trim();
    let name = if name.is_empty() { parsed.comment.trim() } else { name };
    let name = if name.is_empty() { parsed.algorithm.as_str() } else { name };
    if name.chars().count() > MAX_NAME {
        return Err(format!("the key's name is longer than {MAX_NAME} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err("the key's name has control characters".into());
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL2jT2+fy6q9IjKhO8fdbUVjWqUcP/YuS5GCCWYIR6Lc alice@laptop";

    #[test]
    fn an_ed25519_key_is_read_with_its_fingerprint() {
        let k = parse(&format!("  {ED}\n")).unwrap();
        assert_eq!(k.algorithm, "ssh-ed25519");
        assert_eq!(k.bits, 256);
        // As `ssh-keygen -lf` prints it.
        assert_eq!(k.fingerprint, "SHA256:EkGqJVNqfcSosNtLI/zmf/nvEVWEwEdD7FGuIpycjwQ");
        assert_eq!(k.comment, "alice@laptop");
        assert!(!k.openssh.contains("alice"), "stored without its comment: {}", k.openssh);
        assert_eq!(key_name("", &k).unwrap(), "alice@laptop");
        assert_eq!(key_name(" work ", &k).unwrap(), "work");
    }

    #[test]
    fn refusals_say_why() {
        assert!(parse("").unwrap_err().contains("paste a public key"));
        assert!(parse("hello world").unwrap_err().contains("not an OpenSSH public key"));
        assert!(parse(&"A".repeat(100 * 1024)).unwrap_err().contains("100 KB"));
        assert!(parse("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n").unwrap_err().contains("private key"));
        assert!(parse(&format!("{ED}\n{ED}")).unwrap_err().contains("one key at a time"));
        let k = parse(ED).unwrap();
        assert!(key_name(&"x".repeat(101), &k).unwrap_err().contains("longer"));
        assert!(key_name("a\u{7}b", &k).unwrap_err().contains("control"));
    }

    #[test]
    fn bit_counts() {
        assert_eq!(significant_bits(&[0, 0x80, 0]), 16);
        assert_eq!(significant_bits(&[0x01, 0xff]), 9);
        assert_eq!(significant_bits(&[]), 0);
    }
}
