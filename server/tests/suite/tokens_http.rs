//! An API token over real HTTP (issue 33, item 7): the Tokens page's
//! create asks for the account's password — none or a wrong one makes
//! nothing —, a token expires (`--token-lifetime-days`), and an expired
//! token or one revoked by the owner's password change answers 401 on
//! `/api/v1`. Before, a session alone made a token that never expired and
//! outlived the owner's password change.

use crate::security_support;

use gantry_core::Role;
use gantry_platform::tokens::TokenLifetime;
use gantry_server::security::Security;
use reqwest::StatusCode;
use security_support::{gate, start, Secured};
use serde_json::Value;

const PW: &str = "erin-password-1";

async fn create(server: &Secured, c: &reqwest::Client, form: &[(&str, &str)]) -> (StatusCode, Value) {
    let res = c.post(server.url("/api/create_token")).form(form).send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn tokens(server: &Secured) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM api_tokens").fetch_one(&server.pool).await.unwrap()
}

async fn api(server: &Secured, secret: &str) -> (StatusCode, String) {
    let res = reqwest::Client::new().get(server.url("/api/v1/compute-tasks")).bearer_auth(secret).send().await.unwrap();
    (res.status(), res.text().await.unwrap())
}

gantry_testkit::timed_test! {
    async fn a_token_needs_the_password_expires_and_dies_with_a_password_change() {
        let dir = tempfile::tempdir().unwrap();
        let security = Security { gate: gate(2), token_lifetime: TokenLifetime::days(30), ..Security::default() };
        let server = start(&dir, security, false).await;
        server.add_user("erin", PW, Role::User).await;
        let erin = server.client();
        assert_eq!(server.login(&erin, "erin", PW).await.status(), StatusCode::OK);

        // A session alone (a stolen cookie) makes no token: no password, or a wrong one.
        let (status, body) = create(&server, &erin, &[("name", "laptop")]).await;
        assert!(!status.is_success(), "made without a password: {status} {body}");
        let (status, body) = create(&server, &erin, &[("name", "laptop"), ("password", "")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let (status, body) = create(&server, &erin, &[("name", "laptop"), ("password", "not-erins-password")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body["Invalid"].as_str().is_some_and(|m| m.contains("password is wrong")), "{body}");
        assert_eq!(tokens(&server).await, 0, "nothing stored");

        // With it: made, with the server's lifetime, and it works.
        let (status, body) = create(&server, &erin, &[("name", "laptop"), ("password", PW)]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let secret = body["secret"].as_str().unwrap().to_string();
        let created = body["token"]["created_at"].as_i64().unwrap();
        assert_eq!(body["token"]["expires_at"].as_i64(), Some(created + 30 * 86_400), "{body}");
        assert_eq!(api(&server, &secret).await.0, StatusCode::OK);
        // The page lists its expiry and its last use.
        let html = erin.get(server.url("/tokens")).send().await.unwrap().text().await.unwrap();
        assert!(html.contains("Expires (UTC)") && html.contains(r#"data-testid="token-expires""#), "expiry shown");
        assert!(!html.contains(r#"data-testid="token-last-used">never"#), "the use above is shown");

        // Expired (moved back rather than waited for): 401, as any invalid token.
        sqlx::query("UPDATE api_tokens SET expires_at = strftime('%s', 'now') - 1").execute(&server.pool).await.unwrap();
        let (status, text) = api(&server, &secret).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "an expired token: {text}");
        assert!(text.contains("a valid API token is required"), "{text}");
        let html = erin.get(server.url("/tokens")).send().await.unwrap().text().await.unwrap();
        assert!(html.contains(r#"data-state="expired""#), "listed as expired");

        // A new one, then the owner's own password change: revoked, 401.
        let (status, body) = create(&server, &erin, &[("name", "ci"), ("password", PW)]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let secret = body["secret"].as_str().unwrap().to_string();
        assert_eq!(api(&server, &secret).await.0, StatusCode::OK);
        let form = [("current", PW), ("new", "erin-password-2"), ("repeat", "erin-password-2")];
        let res = erin.post(server.url("/api/change_password")).form(&form).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let (status, text) = api(&server, &secret).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "a token from before the password change: {text}");
        let revoked: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM api_tokens WHERE revoked_at IS NOT NULL").fetch_one(&server.pool).await.unwrap();
        assert_eq!(revoked, 2, "both revoked by the change (the expired one too)");
    }
}
