//! How the Tokens page words personal API tokens (the platform's
//! `TokenView`).

/// A token's last use: "never" or the UTC time.
pub fn last_used_label(last_used_at: Option<i64>) -> String {
    last_used_at.map(gantry_core::time::format_utc).unwrap_or_else(|| "never".to_string())
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
    fn labels() {
        assert_eq!(last_used_label(None), "never");
        assert_eq!(curl_example("gnt_x"), "curl -H 'Authorization: Bearer gnt_x' \"$GANTRY_URL/api/v1/compute-tasks\"");
    }
}
