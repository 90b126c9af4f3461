//! Which address a request comes from, for the sign-in throttle and the
//! per-client connection cap: the peer, or behind a trusted reverse proxy
//! the address that proxy appended to `X-Forwarded-For`.

/// The client address a request is counted against: the TCP peer, or —
/// only when Gantry is told it sits behind a trusted reverse proxy — the
/// last address in `X-Forwarded-For` (the one that proxy appended; earlier
/// entries are whatever the client claimed). A header that does not parse
/// as an address falls back to the peer.
///
/// `forwarded_for` is every `X-Forwarded-For` line of the request, in
/// order (a single `Option<&str>` will do for one): repeated lines are one
/// comma-separated list, and a proxy that appends a line of its own leaves
/// the client's line first — so the last entry of the last line counts,
/// never the first line alone. Pass an unreadable line as `""` (it then
/// names no address and the peer counts), never leave it out.
pub fn client_address<'a>(peer: &str, forwarded_for: impl IntoIterator<Item = &'a str>, trust_proxy: bool) -> String {
    if trust_proxy {
        let last = forwarded_for.into_iter().last().and_then(|h| h.rsplit(',').next()).map(str::trim);
        if let Some(addr) = last.and_then(|a| a.parse::<std::net::IpAddr>().ok()) {
            return addr.to_string();
        }
    }
    peer.to_string()
}

/// The address the account guard resolved for this request
/// (`guard::resolve_user`), as the audit log and the throttle see it.
pub fn of(parts: &axum::http::request::Parts) -> Option<String> {
    parts.extensions.get::<app::api::auth::ClientAddress>().and_then(|a| a.0.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_for_counts_only_behind_a_trusted_proxy() {
        assert_eq!(client_address("10.0.0.1", Some("1.2.3.4"), false), "10.0.0.1");
        assert_eq!(client_address("10.0.0.1", Some("6.6.6.6, 1.2.3.4"), true), "1.2.3.4");
        assert_eq!(client_address("10.0.0.1", Some("nonsense"), true), "10.0.0.1");
        assert_eq!(client_address("10.0.0.1", None, true), "10.0.0.1");
        assert_eq!(client_address("10.0.0.1", Some("::1"), true), "::1");
    }

    #[test]
    fn repeated_forwarded_for_lines_are_one_list_and_its_last_entry_counts() {
        // The client wrote the first line; the proxy appended the second.
        assert_eq!(client_address("10.0.0.1", ["10.9.0.1", "203.0.113.7"], true), "203.0.113.7");
        assert_eq!(client_address("10.0.0.1", ["10.9.0.1, 10.9.0.2", "6.6.6.6, 203.0.113.7"], true), "203.0.113.7");
        assert_eq!(client_address("10.0.0.1", ["10.9.0.1", "203.0.113.7"], false), "10.0.0.1");
        // A last line that names no address (unreadable lines arrive empty)
        // falls back to the peer, never to an earlier, client-written entry.
        assert_eq!(client_address("10.0.0.1", ["10.9.0.1", ""], true), "10.0.0.1");
        assert_eq!(client_address("10.0.0.1", ["10.9.0.1", "nonsense"], true), "10.0.0.1");
        assert_eq!(client_address("10.0.0.1", [] as [&str; 0], true), "10.0.0.1");
    }
}
