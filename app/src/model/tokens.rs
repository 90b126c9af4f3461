//! Personal API tokens as the Tokens page shows them. The secret travels
//! only once, in the answer to the create that made it.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRow {
    pub id: i64,
    pub name: String,
    /// The secret's first characters ("gnt_1a2b3c"), to tell tokens apart.
    pub prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedToken {
    pub token: TokenRow,
    pub secret: String,
}

/// "never" or the UTC time.
pub fn last_used_label(t: &TokenRow) -> String {
    t.last_used_at.map(gantry_core::time::format_utc).unwrap_or_else(|| "never".to_string())
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
        let t = TokenRow {
            id: 1,
            name: "ci".into(),
            prefix: "gnt_abc123".into(),
            created_at: 0,
            last_used_at: None,
            revoked_at: None,
        };
        assert_eq!(last_used_label(&t), "never");
        assert_eq!(curl_example("gnt_x"), "curl -H 'Authorization: Bearer gnt_x' \"$GANTRY_URL/api/v1/compute-tasks\"");
    }
}
