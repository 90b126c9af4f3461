//! Pages are served again while nothing they show has changed: what this
//! must never cost is a stale page. Each step reads a page (so it is kept),
//! changes what it shows — through a server function, straight in the
//! database, or by taking the account away — and reads it again at once.

use crate::common;

use common::{login, TestServer};
use gantry_core::Role;
use gantry_platform::accounts;

const PW: &str = "cache-password-1";

async fn page(client: &reqwest::Client, server: &TestServer, path: &str) -> (String, String) {
    let res = client.get(server.url(path)).send().await.unwrap();
    assert_eq!(res.status(), 200, "{path}");
    let csp = res.headers()["content-security-policy"].to_str().unwrap().to_string();
    (csp, res.text().await.unwrap())
}

/// The nonce the CSP header allows.
fn nonce(csp: &str) -> String {
    let at = csp.find("'nonce-").expect("a nonce in the CSP") + "'nonce-".len();
    csp[at..].split('\'').next().unwrap().to_string()
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_kept_page_never_hides_a_change_and_carries_its_own_nonce() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_user(&server.pool, None, accounts::NewUser { username: "carol", password: PW, role: Role::User, group: None }).await.unwrap();
        let carol = server.client();
        assert_eq!(login(&server, &carol, "carol", PW).await.status(), 200);

        // The same page twice: each answer's scripts carry that answer's nonce.
        for _ in 0..3 {
            let (csp, html) = page(&carol, &server, "/tokens").await;
            let n = nonce(&csp);
            assert!(html.contains(&format!("nonce=\"{n}\"")), "the page's scripts carry this answer's nonce {n}");
            assert!(!html.contains("cache-token-1"));
        }

        // Through a server function.
        let res = carol.post(server.url("/api/create_token")).form(&[("name", "cache-token-1"), ("password", PW)]).send().await.unwrap();
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
        assert!(page(&carol, &server, "/tokens").await.1.contains("cache-token-1"), "the new token is listed at once");

        // Straight in the database, as the background services write.
        page(&carol, &server, "/tokens").await;
        sqlx::query("UPDATE api_tokens SET name = 'renamed-in-db' WHERE name = 'cache-token-1'").execute(&server.pool).await.unwrap();
        let (_, html) = page(&carol, &server, "/tokens").await;
        assert!(html.contains("renamed-in-db") && !html.contains("cache-token-1"), "the row as committed");

        // Another account never gets carol's page, even at the same address.
        accounts::create_user(&server.pool, None, accounts::NewUser { username: "dave", password: PW, role: Role::User, group: None }).await.unwrap();
        let dave = server.client();
        assert_eq!(login(&server, &dave, "dave", PW).await.status(), 200);
        assert!(!page(&dave, &server, "/tokens").await.1.contains("renamed-in-db"));

        // An account disabled meanwhile gets no page at all.
        page(&carol, &server, "/tokens").await;
        let carol_id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = 'carol'").fetch_one(&server.pool).await.unwrap();
        sqlx::query("UPDATE users SET disabled = 1 WHERE id = ?").bind(carol_id).execute(&server.pool).await.unwrap();
        let res = carol.get(server.url("/tokens")).send().await.unwrap();
        assert_ne!(res.status(), 200, "a disabled account's session shows nothing");
        assert!(!res.text().await.unwrap().contains("renamed-in-db"));
    }
}
