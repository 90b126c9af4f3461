//! The per-token rate limit over real HTTP: with a rate of 1 a minute and
//! a burst of 2, a token's third request at once is 429 `rate_limited`
//! with `Retry-After` (whole seconds, within the minute), and changes
//! nothing; another token of the same account is counted on its own.

use crate::security_support::{start, Secured};
use gantry_core::Role;
use gantry_platform::{accounts, tokens};
use gantry_server::{routes::api_v1::rate_limit::ApiLimiter, security::Security};
use reqwest::StatusCode;
use serde_json::Value;

async fn get(server: &Secured, token: &str) -> reqwest::Response {
    reqwest::Client::new().get(server.url("/api/v1/machines")).bearer_auth(token).send().await.unwrap()
}

gantry_testkit::timed_test! {
    async fn a_token_over_its_rate_is_told_when_to_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let security = Security { api_limiter: ApiLimiter::new(1, 2), ..Security::default() };
        let server = start(&dir, security, false).await;
        let new = accounts::NewUser { username: "alice", password: "a-good-password", role: Role::User, group: None };
        let alice = accounts::create_user(&server.pool, None, new).await.unwrap();
        let (_, first) = tokens::create(&server.pool, &alice, "one").await.unwrap();
        let (_, second) = tokens::create(&server.pool, &alice, "two").await.unwrap();

        assert_eq!(get(&server, &first).await.status(), StatusCode::OK);
        assert_eq!(get(&server, &first).await.status(), StatusCode::OK);
        let res = get(&server, &first).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "Retry-After {wait}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["code"], "rate_limited", "{body}");
        assert!(body["error"].as_str().unwrap().contains("try again"), "{body}");
        // A write over the rate is refused before it is read: nothing made.
        let res = reqwest::Client::new()
            .post(server.url("/api/v1/machines"))
            .bearer_auth(&first)
            .json(&serde_json::json!({"name": "box", "gpus": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let machines: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM machines").fetch_one(&server.pool).await.unwrap();
        assert_eq!(machines, 0);
        // The other token has its own allowance.
        assert_eq!(get(&server, &second).await.status(), StatusCode::OK);
    }
}
