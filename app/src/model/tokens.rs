//! How the Tokens page words personal API tokens (the platform's
//! `TokenView`).

/// A token's last use: "never" or the UTC time.
pub fn last_used_label(last_used_at: Option<i64>) -> String {
    last_used_at.map(gantry_core::time::format_utc).unwrap_or_else(|| "never".to_string())
}

/// A token's state for the list: the row's `data-state` word (`active`,
/// `expired`, `revoked`) and what the State column says. Revoked wins over
/// expired: it is what the owner (or a change to the account) did.
pub fn state_label(revoked_at: Option<i64>, expired: bool, expires_at: Option<i64>) -> (&'static str, String) {
    match (revoked_at, expired, expires_at) {
        (Some(at), _, _) => ("revoked", format!("revoked {}", gantry_core::time::format_utc(at))),
        (None, true, Some(at)) => ("expired", format!("expired {}", gantry_core::time::format_utc(at))),
        (None, true, None) => ("expired", "expired".to_string()),
        (None, false, _) => ("active", "active".to_string()),
    }
}

/// The `curl` line the page suggests for a new token (`$GANTRY_URL` is
/// where this server is reached, which only the person knows for sure
/// behind proxies).
pub fn curl_example(secret: &str) -> String {
    format!("curl -H 'Authorization: Bearer {secret}' \"$GANTRY_URL/api/v1/compute-tasks\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states() {
        let expires = Some(90 * 86_400);
        assert_eq!(state_label(None, false, expires), ("active", "active".to_string()));
        assert_eq!(state_label(None, true, expires).0, "expired");
        assert!(state_label(None, true, expires).1.starts_with("expired "));
        assert_eq!(state_label(None, true, None), ("expired", "expired".to_string()));
        assert_eq!(state_label(Some(60), true, expires).0, "revoked", "revoked wins over expired");
    }

    #[test]
    fn labels() {
        assert_eq!(last_used_label(None), "never");
        assert_eq!(curl_example("gnt_x"), "curl -H 'Authorization: Bearer gnt_x' \"$GANTRY_URL/api/v1/compute-tasks\"");
    }
}
