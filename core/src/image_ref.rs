//! Docker image references, held to the engine's own grammar (the
//! distribution `reference` rules): `[domain[:port]/]path[:tag][@digest]`.
//! A reference the engine would answer "invalid reference format" is
//! refused when an admin adds it, saying why, rather than failing every
//! machine or compute task later with a vague engine error.

/// Why `reference` is not one the engine would take; `Ok` when it is.
pub fn check(reference: &str) -> Result<(), String> {
    if reference.is_empty() || reference.len() > 255 {
        return Err("it must be 1 to 255 characters".into());
    }
    let (rest, digest) = match reference.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (reference, None),
    };
    if let Some(digest) = digest {
        let (algorithm, hex) =
            digest.split_once(':').ok_or("a digest is algorithm:hex, e.g. sha256:<64 hex digits>")?;
        let algorithm_ok = !algorithm.is_empty()
            && algorithm.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b));
        if !algorithm_ok || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("a digest is algorithm:hex, e.g. sha256:<64 hex digits>".into());
        }
    }
    // A tag follows the last ':' that comes after the last '/' (a ':' before it is a port).
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[slash..].rfind(':') {
        Some(i) => (&rest[..slash + i], Some(&rest[slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(tag) = tag {
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let ok = !tag.is_empty()
            && tag.len() <= 128
            && word(tag.as_bytes()[0])
            && tag.bytes().all(|b| word(b) || b == b'.' || b == b'-');
        if !ok {
            return Err(format!(
                "the tag {tag:?} must be letters, digits, '_', '.' or '-' (at most 128, not starting with '.' or '-')"
            ));
        }
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    let first = parts[0];
    if parts.len() > 1 && (first.contains('.') || first.contains(':') || first == "localhost") {
        domain(first)?;
        parts.remove(0);
    }
    for part in parts {
        path_component(part)?;
    }
    Ok(())
}

fn domain(d: &str) -> Result<(), String> {
    let (host, port) = match d.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (d, None),
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !host.split('.').all(label_ok) || port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return Err(format!("the registry {d:?} is not a host name with an optional :port"));
    }
    Ok(())
}

/// Lower-case letters and digits, joined by '.', '_', '__' or dashes.
fn path_component(c: &str) -> Result<(), String> {
    let bad = || {
        Err(format!("the repository part {c:?} must be lower-case letters and digits, joined by '.', '_', '__' or '-'"))
    };
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = c.as_bytes();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return bad();
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        // A separator: '.', '_', '__', or a run of '-'.
        let start = i;
        match bytes[i] {
            b'.' => i += 1,
            b'_' => i += if bytes.get(i + 1) == Some(&b'_') { 2 } else { 1 },
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return bad(),
        }
        if i == start || !bytes.get(i).copied().is_some_and(alnum) {
            return bad();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn references_the_engine_takes_pass() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        for good in [
            "busybox".to_string(),
            "gantry/devbox:latest".into(),
            "registry.example:5000/team/torch:2.4-cuda12".into(),
            format!("registry.example:5000/team/torch:2.4-cuda12@{digest}"),
            format!("torch@{digest}"),
            "localhost/a__b/c-d--e/f.g:V_1.0".into(),
            "Registry.Example.com/x/y".into(),
        ] {
            assert_eq!(check(&good), Ok(()), "{good}");
        }
    }

    #[test]
    fn references_the_engine_refuses_are_refused_with_why() {
        for (bad, why) in [
            ("ml/Torch:2.4", "lower-case"),
            ("torch:2.4:cuda", "lower-case"),
            ("torch@latest", "digest"),
            ("torch@sha256:abc", "digest"),
            ("team/", "lower-case"),
            ("a/../b", "lower-case"),
            ("torch:-x", "tag"),
            ("torch:", "tag"),
            ("a..b", "lower-case"),
            ("a_-b", "lower-case"),
            ("-a", "lower-case"),
            ("reg:port/x", "registry"),
            ("", "1 to 255"),
        ] {
            let got = check(bad).unwrap_err();
            assert!(got.contains(why), "{bad}: {got}");
        }
    }
}
