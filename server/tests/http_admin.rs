//! The admin boundary, foreign origins and the 404 page, over real HTTP.

mod common;

use common::{count, login, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use reqwest::{header, StatusCode};

gantry_testkit::timed_test! {
    async fn non_admins_get_403_from_admin_pages_and_functions() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        server.add_user("dave", "daves-password", Role::User).await;
        let client = server.client();
        assert_eq!(login(&server, &client, "dave", "daves-password").await.status(), StatusCode::OK);

        let page = client.get(server.url("/admin")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::FORBIDDEN);
        assert!(page.text().await.unwrap().contains("Administrators only"));
        let list = client.post(server.url("/api/admin/users")).send().await.unwrap();
        assert_eq!(list.status(), StatusCode::FORBIDDEN);
        let create = client
            .post(server.url("/api/admin/create_user"))
            .form(&[("username", "mallory"), ("password", "mallorys-pass"), ("role", "admin"), ("group", "")])
            .send()
            .await
            .unwrap();
        assert_eq!(create.status(), StatusCode::FORBIDDEN);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM users WHERE username = 'mallory'").await, 0);

        let anonymous = server.client().post(server.url("/api/admin/users")).send().await.unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    }
}

gantry_testkit::timed_test! {
    async fn admin_creates_users_and_bad_input_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = server.client();
        assert_eq!(login(&server, &client, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);
        let create = |u: &str, p: &str, role: &str, group: &str| {
            client
                .post(server.url("/api/admin/create_user"))
                .form(&[("username", u), ("password", p), ("role", role), ("group", group)])
                .send()
        };
        let ok = create("erin", "erins-password", "user", "").await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(login(&server, &server.client(), "erin", "erins-password").await.status(), StatusCode::OK);

        let long = "e".repeat(300);
        let bad = [
            ("erin", "erins-password", "user", "", StatusCode::CONFLICT, "the username \\\"erin\\\" is taken"),
            ("", "some-password", "user", "", StatusCode::BAD_REQUEST, "username is required"),
            (long.as_str(), "some-password", "user", "", StatusCode::BAD_REQUEST, "username must be at most 32 characters"),
            ("frank", "short", "user", "", StatusCode::BAD_REQUEST, "password must be at least 8 characters"),
            ("frank", "franks-password", "root", "", StatusCode::BAD_REQUEST, "unknown role"),
            ("frank", "franks-password", "user", "no-such", StatusCode::NOT_FOUND, "group \\\"no-such\\\" not found"),
        ];
        for (u, p, r, g, status, message) in bad {
            let res = create(u, p, r, g).await.unwrap();
            assert_eq!(res.status(), status, "{}", &u[..u.len().min(10)]);
            let body = res.text().await.unwrap();
            assert!(body.contains(message), "{body} should say {message}");
        }
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM users").await, 2, "admin and erin only");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log WHERE action = 'user.create'").await, 2);
    }
}

gantry_testkit::timed_test! {
    async fn foreign_origins_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let raw = reqwest::Client::new();
        let res = raw
            .post(server.url("/api/login"))
            .header(header::ORIGIN, "http://attacker.example")
            .form(&[("username", "admin"), ("password", ADMIN_PASSWORD)])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        assert_eq!(res.text().await.unwrap(), "cross-origin request refused");
        let fetch_meta = raw
            .post(server.url("/api/login"))
            .header("sec-fetch-site", "cross-site")
            .form(&[("username", "admin"), ("password", ADMIN_PASSWORD)])
            .send()
            .await
            .unwrap();
        assert_eq!(fetch_meta.status(), StatusCode::FORBIDDEN);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tower_sessions").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn unknown_pages_are_404_and_missing_files_too() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = server.client();
        login(&server, &client, "admin", ADMIN_PASSWORD).await;
        let page = client.get(server.url("/no/such/page")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::NOT_FOUND);
        assert!(page.text().await.unwrap().contains("Page not found"));
        let file = client.get(server.url("/pkg/missing.js")).send().await.unwrap();
        assert_eq!(file.status(), StatusCode::NOT_FOUND);
    }
}
