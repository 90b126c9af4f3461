//! A container engine's address as Gantry stores and compares it. One
//! engine must be one node (its GPUs would otherwise be offered twice), so
//! the spellings of the same address — `TCP://Host:2375/`, `tcp://host:2375`,
//! `unix:////var/run//docker.sock` — must come out the same.

/// The stored form of `raw`: scheme and host lower-cased, no trailing `/`,
/// a socket path with repeated `/` collapsed. `Err`: why it is no engine
/// address Gantry can use.
pub fn engine_endpoint(raw: &str) -> Result<String, String> {
    const EXPECTED: &str = "endpoint must be unix:///path/to/docker.sock, tcp://host:port or tls://host:port";
    let raw = raw.trim();
    if raw.is_empty() || raw.len() > 200 || raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(EXPECTED.into());
    }
    let (scheme, rest) = raw.split_once("://").ok_or(EXPECTED)?;
    match scheme.to_ascii_lowercase().as_str() {
        "unix" => {
            let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
            if !rest.starts_with('/') || parts.is_empty() || parts.iter().any(|p| *p == "." || *p == "..") {
                return Err(EXPECTED.into());
            }
            Ok(format!("unix:///{}", parts.join("/")))
        }
        s @ ("tcp" | "tls") => {
            // An engine is reached at its root: a path after the host is a mistake.
            let host = rest.trim_end_matches('/');
            let ok = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || ".-_:[]".contains(c));
            if !ok {
                return Err(EXPECTED.into());
            }
            Ok(format!("{s}://{}", host.to_ascii_lowercase()))
        }
        _ => Err(EXPECTED.into()),
    }
}

/// The scheme of a simulated node's address: `simulated://NAME`, NAME
/// being the node's own name.
pub const SIMULATED_SCHEME: &str = "simulated://";

/// `Some(NAME)` when `raw` is a simulated node's address
/// (`simulated://NAME`, the scheme in any case, spaces around and a
/// trailing `/` ignored); `None` for any other address. NAME is not
/// checked here: it must pass the node-name rules (`validate::name`).
pub fn simulated_name(raw: &str) -> Option<&str> {
    let raw = raw.trim();
    let (scheme, rest) = raw.split_at_checked(SIMULATED_SCHEME.len())?;
    scheme.eq_ignore_ascii_case(SIMULATED_SCHEME).then(|| rest.strip_suffix('/').unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::{engine_endpoint, simulated_name};

    #[test]
    fn a_simulated_address_names_its_node() {
        assert_eq!(simulated_name("simulated://lab-2"), Some("lab-2"));
        assert_eq!(simulated_name(" SIMULATED://lab-2/ "), Some("lab-2"));
        assert_eq!(simulated_name("simulated://"), Some(""));
        assert_eq!(simulated_name("simulated://Bad Name"), Some("Bad Name"), "the name rules judge it");
        for other in ["tcp://host:2375", "unix:///var/run/docker.sock", "simulated:/x", "sim", ""] {
            assert_eq!(simulated_name(other), None, "{other}");
        }
    }

    #[test]
    fn spellings_of_one_engine_are_one_address() {
        for (raw, stored) in [
            ("tcp://host:2375", "tcp://host:2375"),
            (" TCP://Host:2375/ ", "tcp://host:2375"),
            ("tls://[::1]:2376//", "tls://[::1]:2376"),
            ("unix:///var/run/docker.sock", "unix:///var/run/docker.sock"),
            ("UNIX:////var/run//docker.sock/", "unix:///var/run/docker.sock"),
        ] {
            assert_eq!(engine_endpoint(raw).as_deref(), Ok(stored), "{raw}");
        }
    }

    #[test]
    fn what_is_no_engine_address_is_refused() {
        for raw in [
            "",
            "ftp://host",
            "tcp://",
            "tcp://host:2375/v1.41",
            "tcp://ho st",
            "unix://relative.sock",
            "unix:///",
            "unix:///a/../b",
            "tcp://h\u{7}",
        ] {
            assert!(engine_endpoint(raw).unwrap_err().starts_with("endpoint must be"), "{raw:?}");
        }
        assert!(engine_endpoint(&format!("tcp://{}", "h".repeat(200))).is_err());
    }
}
