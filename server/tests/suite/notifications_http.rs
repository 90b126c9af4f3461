//! Notifications over real HTTP, as the pages' forms post them: the
//! navigation shows the unread count, the list marks unread ones, "mark
//! read" and "mark all read" work without JavaScript, and another user's
//! notifications are neither listed nor marked. The channel settings refuse
//! a bad address or a hostile webhook URL with why and change nothing; the
//! webhook's secret is shown once, after a no-JavaScript post too.

use crate::common;

use common::{login, TestServer};
use gantry_core::Role;
use gantry_platform::notifications::{self, Kind};
use reqwest::{header, StatusCode};

/// What a browser without JavaScript accepts (server functions redirect it).
const HTML: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
const PW: &str = "a-good-password";

async fn notice(server: &TestServer, user: i64, subject: &str) -> i64 {
    let mut conn = server.pool.acquire().await.unwrap();
    notifications::notify(&mut conn, user, Kind::QuotaChanged, subject, "body text").await.unwrap()
}

async fn page(server: &TestServer, client: &reqwest::Client, path: &str) -> String {
    let res = client.get(server.url(path)).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{path}");
    res.text().await.unwrap()
}

async fn form(server: &TestServer, client: &reqwest::Client, endpoint: &str, fields: &[(&str, &str)]) -> StatusCode {
    let res = client.post(server.url(endpoint)).header(header::ACCEPT, HTML).form(fields).send().await.unwrap();
    res.status()
}

async fn user_id(server: &TestServer, name: &str) -> i64 {
    sqlx::query_scalar("SELECT id FROM users WHERE username = ?").bind(name).fetch_one(&server.pool).await.unwrap()
}

async fn unread(server: &TestServer, user: i64) -> i64 {
    notifications::unread_count(&server.pool, user).await.unwrap()
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn unread_count_mark_read_and_other_users_notifications_unseen() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        server.add_user("alice", PW, Role::User).await;
        server.add_user("bob", PW, Role::User).await;
        let alice_id = user_id(&server, "alice").await;
        let bob_id = user_id(&server, "bob").await;
        let first = notice(&server, alice_id, "Alice first").await;
        notice(&server, alice_id, "Alice second").await;
        let bobs = notice(&server, bob_id, "Bob private").await;
        let alice = server.client();
        assert_eq!(login(&server, &alice, "alice", PW).await.status(), StatusCode::OK);

        let html = page(&server, &alice, "/notifications").await;
        assert!(html.contains(r#"data-testid="unread-count""#) && html.contains(r#"aria-label="2 unread""#), "the badge says 2");
        assert!(html.contains("Alice first") && html.contains("Alice second") && !html.contains("Bob private"));
        assert!(html.find("Alice second").unwrap() < html.find("Alice first").unwrap(), "newest first");
        assert_eq!(html.matches(r#"data-state="unread""#).count(), 2);

        // Bob's notification cannot be marked by alice (not found), nor listed.
        assert_ne!(form(&server, &alice, "/api/mark_notification_read", &[("notification_id", &bobs.to_string())]).await, StatusCode::OK);
        assert_eq!(unread(&server, bob_id).await, 1, "another user's notification was marked");

        // Mark one read, without JavaScript: redirected back, one left.
        let status = form(&server, &alice, "/api/mark_notification_read", &[("notification_id", &first.to_string())]).await;
        assert!(status.is_redirection(), "{status}");
        assert_eq!(unread(&server, alice_id).await, 1);
        let html = page(&server, &alice, "/notifications").await;
        assert!(html.contains(r#"aria-label="1 unread""#));
        assert_eq!(html.matches(r#"data-state="read""#).count(), 1);

        // Mark all read: no badge any more, bob's untouched.
        assert!(form(&server, &alice, "/api/mark_all_notifications_read", &[]).await.is_redirection());
        assert_eq!(unread(&server, alice_id).await, 0);
        assert!(!page(&server, &alice, "/notifications").await.contains(r#"data-testid="unread-count""#));
        assert_eq!(unread(&server, bob_id).await, 1);
    }
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn channel_settings_refuse_bad_input_and_show_the_secret_once() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        server.add_user("carol", PW, Role::User).await;
        let carol = server.client();
        assert_eq!(login(&server, &carol, "carol", PW).await.status(), StatusCode::OK);
        let rows = || async { sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM notification_settings").fetch_one(&server.pool).await.unwrap() };

        let long = format!("https://example.org/{}", "a".repeat(2100));
        for (fields, says) in [
            (vec![("email", "carol-at-example.org")], "no @"),
            (vec![("webhook_url", "ftp://example.org/hook")], "http:// or https://"),
            (vec![("webhook_url", "https://example.org/a hook")], "spaces"),
            (vec![("webhook_url", long.as_str())], "at most 2000"),
            (vec![("webhook_url", "http://169.254.169.254/")], "link-local"),
            (vec![("email_kinds[]", "everything")], "unknown notification kind"),
        ] {
            let res = carol.post(server.url("/api/save_notification_settings")).form(&fields).send().await.unwrap();
            let status = res.status();
            let body = res.text().await.unwrap();
            assert_eq!(status, StatusCode::BAD_REQUEST, "{fields:?}: {body}");
            assert!(body.contains(says), "{fields:?}: {body}");
            assert_eq!(rows().await, 0, "a refused save stored something");
        }

        // A good save: the secret comes back once, in the answer.
        let fields = [
            ("email", "carol@example.org"),
            ("email_kinds[]", "reclaim_warning"),
            ("email_kinds[]", "reclaim"),
            ("webhook_url", "http://127.0.0.1:9/hook"),
            ("webhook_kinds[]", "quota_changed"),
        ];
        let res = carol.post(server.url("/api/save_notification_settings")).form(&fields).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let body: serde_json::Value = res.json().await.unwrap();
        assert!(body["secret"].as_str().is_some_and(|s| s.starts_with("whsec_")), "{body}");
        let html = page(&server, &carol, "/account/notifications").await;
        assert!(html.contains(r#"value="carol@example.org""#) && html.contains("A signing secret is set"));
        assert!(!html.contains(r#"data-testid="new-webhook-secret""#), "the secret is not shown again");

        // A new secret without JavaScript: redirected, shown on the next page once.
        assert!(form(&server, &carol, "/api/regenerate_webhook_secret", &[]).await.is_redirection());
        let stored: String = sqlx::query_scalar("SELECT webhook_secret FROM notification_settings").fetch_one(&server.pool).await.unwrap();
        let html = page(&server, &carol, "/account/notifications").await;
        assert!(html.contains(r#"data-testid="new-webhook-secret""#) && html.contains(&stored), "the new secret is shown");
        assert!(!page(&server, &carol, "/account/notifications").await.contains(&stored), "shown once");
    }
}
