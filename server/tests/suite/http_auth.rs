//! Signing in and out against the real server on port 0.

use crate::common;

use common::{count, login, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use reqwest::{header, StatusCode};

gantry_testkit::timed_test! {
    async fn healthz_answers_ok() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let res = server.client().get(server.url("/healthz")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.text().await.unwrap(), "ok");
    }
}

gantry_testkit::timed_test! {
    async fn anonymous_pages_redirect_to_sign_in() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let res = server.client().get(server.url("/admin/groups")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        assert_eq!(res.headers()[header::LOCATION], "/login?next=/admin/groups");
        let page = server.client().get(server.url("/login")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let html = page.text().await.unwrap();
        assert!(html.contains(r#"<form action="/api/login" method="post""#), "sign-in form is server-rendered");
    }
}

gantry_testkit::timed_test! {
    async fn admin_signs_in_and_sees_the_dashboard_with_group_quota() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        sqlx::query("UPDATE groups SET gpu_quota = 8, gpus_in_use = 3 WHERE name = 'default'").execute(&server.pool).await.unwrap();
        let client = server.client();

        let res = login(&server, &client, "admin", ADMIN_PASSWORD).await;
        assert_eq!(res.status(), StatusCode::OK);
        let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap().to_owned();
        assert!(cookie.starts_with("gantry_session="), "{cookie}");
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
        assert!(!cookie.contains("Secure"), "plain-HTTP deployments must not get Secure cookies: {cookie}");
        let me: serde_json::Value = res.json().await.unwrap();
        assert_eq!(me["username"], "admin");
        assert_eq!(me["role"], "admin");

        let page = client.get(server.url("/")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let html = page.text().await.unwrap();
        assert!(html.contains(r#"data-testid="dash-user">admin<"#), "dashboard names the user");
        assert!(html.contains(r#"data-testid="dash-group">default<"#), "dashboard names the group");
        assert!(html.contains(r#"data-testid="quota-used">3<"#) && html.contains(r#"data-testid="quota-total">8<"#), "quota from the database");
    }
}

gantry_testkit::timed_test! {
    async fn bad_sign_ins_get_clear_messages_and_no_session() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = server.client();
        let long = "x".repeat(5000);
        let cases: [(&str, &str, StatusCode, &str); 5] = [
            ("admin", "wrong-password", StatusCode::UNAUTHORIZED, "BadCredentials"),
            ("nobody", "whatever-pass", StatusCode::UNAUTHORIZED, "BadCredentials"),
            ("", "whatever-pass", StatusCode::BAD_REQUEST, "username is required"),
            ("admin", "", StatusCode::BAD_REQUEST, "password is required"),
            ("admin", &long, StatusCode::BAD_REQUEST, "password must be at most 128 characters"),
        ];
        for (user, pw, status, message) in cases {
            let res = login(&server, &client, user, pw).await;
            assert_eq!(res.status(), status, "{user}/{}", pw.len());
            assert!(res.headers().get(header::SET_COOKIE).is_none(), "a failed sign-in must not start a session");
            let body = res.text().await.unwrap();
            assert!(body.contains(message), "{body} should say {message}");
        }
        let page = client.get(server.url("/")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::SEE_OTHER, "still signed out");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tower_sessions").await, 0);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM users").await, 1);
    }
}

gantry_testkit::timed_test! {
    async fn repeated_failures_are_throttled() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = server.client();
        for _ in 0..5 {
            assert_eq!(login(&server, &client, "admin", "guess-guess").await.status(), StatusCode::UNAUTHORIZED);
        }
        let res = login(&server, &client, "admin", ADMIN_PASSWORD).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(res.text().await.unwrap().contains("too many failed sign-in attempts"));
    }
}

gantry_testkit::timed_test! {
    async fn form_post_without_javascript_signs_in_and_redirects() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = server.client();
        let post = |pw: &'static str| {
            client
                .post(server.url("/api/login"))
                .header(header::ACCEPT, "text/html,application/xhtml+xml")
                .header(header::REFERER, server.url("/login?next=/admin"))
                .form(&[("username", "admin"), ("password", pw), ("next", "/admin")])
                .send()
        };
        let failed = post("not-the-password").await.unwrap();
        assert_eq!(failed.status(), StatusCode::FOUND, "a no-JS form must be sent back to its page");
        let back = failed.headers()[header::LOCATION].to_str().unwrap().to_owned();
        assert!(!back.contains("__err="), "the refusal is kept in the session, not the URL: {back}");
        let html = client.get(&back).send().await.unwrap().text().await.unwrap();
        assert!(html.contains("wrong username or password"), "the error shows on the re-rendered form");

        let ok = post(ADMIN_PASSWORD).await.unwrap();
        assert_eq!(ok.status(), StatusCode::FOUND);
        assert_eq!(ok.headers()[header::LOCATION], "/admin");
        assert_eq!(client.get(server.url("/admin")).send().await.unwrap().status(), StatusCode::OK);
    }
}

gantry_testkit::timed_test! {
    async fn sessions_survive_a_server_restart_and_logout_ends_them() {
        let dir = tempfile::tempdir().unwrap();
        let first = TestServer::start(&dir).await;
        let res = login(&first, &first.client(), "admin", ADMIN_PASSWORD).await;
        assert_eq!(res.status(), StatusCode::OK);
        let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_owned();
        first.stop();

        let second = TestServer::start(&dir).await;
        let raw = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let page = raw.get(second.url("/")).header(header::COOKIE, &cookie).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK, "the session lives in the database, not the process");

        let out = raw
            .post(second.url("/api/logout"))
            .header(header::COOKIE, &cookie)
            .header(header::ORIGIN, format!("http://{}", second.addr))
            .send()
            .await
            .unwrap();
        assert_eq!(out.status(), StatusCode::OK);
        let after = raw.get(second.url("/")).header(header::COOKIE, &cookie).send().await.unwrap();
        assert_eq!(after.status(), StatusCode::SEE_OTHER, "signed out for good");
    }
}

gantry_testkit::timed_test! {
    async fn secure_cookies_when_configured_for_https() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start_with(&dir, true).await;
        // A browser behind the TLS terminator sends an https Origin.
        let https = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .default_headers([(header::ORIGIN, format!("https://{}", server.addr).parse().unwrap())].into_iter().collect())
            .build()
            .unwrap();
        let res = login(&server, &https, "admin", ADMIN_PASSWORD).await;
        let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap().to_string();
        // `__Host-`: only this host, Secure, for `/`, no Domain (browsers
        // refuse such a cookie otherwise, so nothing else can plant it).
        assert!(cookie.starts_with("__Host-gantry_session="), "{cookie}");
        assert!(cookie.contains("Secure") && cookie.contains("Path=/") && !cookie.contains("Domain"), "{cookie}");

        // Over plain HTTP the prefix would make browsers drop the cookie.
        let dir = tempfile::tempdir().unwrap();
        let plain = TestServer::start(&dir).await;
        let res = login(&plain, &plain.client(), "admin", ADMIN_PASSWORD).await;
        let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap().to_string();
        assert!(cookie.starts_with("gantry_session=") && !cookie.contains("Secure"), "{cookie}");
    }
}

gantry_testkit::timed_test! {
    async fn users_can_be_added_and_sign_in() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        server.add_user("carol", "carols-password", Role::User).await;
        let res = login(&server, &server.client(), "carol", "carols-password").await;
        assert_eq!(res.status(), StatusCode::OK);
    }
}

gantry_testkit::timed_test! {
    async fn parallel_wrong_passwords_are_all_answered_and_none_fails_on_a_busy_database() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        // Failures are counted in one `BEGIN IMMEDIATE` transaction each, so
        // concurrent ones wait for the write lock instead of failing with
        // SQLITE_BUSY ("database is locked", once answered 500).
        let attempts = (0..24).map(|i| {
            let (server_client, url) = (server.client(), server.url("/api/login"));
            let user = if i % 2 == 0 { "admin".to_string() } else { format!("ghost{i}") };
            async move { server_client.post(url).form(&[("username", user.as_str()), ("password", "wrong-password")]).send().await.unwrap().status() }
        });
        let statuses = futures_util::future::join_all(attempts).await;
        for status in &statuses {
            assert!(matches!(*status, StatusCode::UNAUTHORIZED | StatusCode::TOO_MANY_REQUESTS), "{statuses:?}");
        }
        // Every attempt is counted before its password is checked (issue
        // 11), so exactly the allowance of admin's 12 is verified (401) and
        // the rest are refused (429); each ghost name has its own count.
        let refused = statuses.iter().filter(|s| **s == StatusCode::UNAUTHORIZED).count() as i64;
        assert_eq!(refused, 5 + 12, "{statuses:?}");
        // No count was lost: each ghost's one attempt is there, and admin's
        // key is locked (once it is, attempts are refused without a write).
        let ghosts = count(&server.pool, "SELECT COUNT(*) FROM login_failures WHERE key LIKE 'user:ghost%' AND failures = 1").await;
        assert_eq!(ghosts, 12, "every ghost's attempt was counted");
        let admin = count(&server.pool, "SELECT failures FROM login_failures WHERE key LIKE 'user:admin|%'").await;
        assert!(admin > 5, "admin's key is past its allowance: {admin}");
    }
}

/// `gantry serve`'s settings as the command line gives them.
fn serve_args(argv: &[&str]) -> Result<gantry_server::config::ServeArgs, clap::Error> {
    use clap::Parser;
    use gantry_server::config::{Cli, Command};
    let argv = ["gantry", "serve"].iter().chain(argv).copied();
    Cli::try_parse_from(argv).map(|cli| match cli.command {
        Command::Serve(args) => args,
        _ => unreachable!("parsed `serve`"),
    })
}

gantry_testkit::timed_test! {
    async fn the_public_origin_is_read_as_browsers_send_it_and_a_malformed_one_refused_at_start() {
        use gantry_server::{bootstrap, router};
        use gantry_testkit::install::Install;
        // As an operator writes it: a trailing slash, capitals.
        let args = serve_args(&["--public-origin", "https://Gantry.Example.ORG/"]).unwrap();
        let Install { dir, pool } = Install::new().await;
        bootstrap::ensure_admin(&pool, "admin", Some(ADMIN_PASSWORD)).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = router::Options { site_root: dir.path().join("site"), site_addr: addr, ..router::Options::from_args(&args) };
        let app = router::build(opts, pool.clone()).await.unwrap();
        tokio::spawn(async move { router::serve(listener, app).await.unwrap() });
        // A browser behind the proxy: its Origin is the serialised origin.
        let res = reqwest::Client::new()
            .post(format!("http://{addr}/api/login"))
            .header(header::ORIGIN, "https://gantry.example.org")
            .form(&[("username", "admin"), ("password", ADMIN_PASSWORD)])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "the proxy's origin is accepted");
        let other = reqwest::Client::new()
            .post(format!("http://{addr}/api/login"))
            .header(header::ORIGIN, "https://gantry.example.org.evil.example")
            .form(&[("username", "admin"), ("password", ADMIN_PASSWORD)])
            .send()
            .await
            .unwrap();
        assert_eq!(other.status(), StatusCode::FORBIDDEN, "another site still is not");

        // Written down as browsers send an origin.
        for (given, origin) in [
            ("https://Gantry.Example.ORG/", "https://gantry.example.org"),
            ("HTTPS://gantry.example.org:443", "https://gantry.example.org"),
            ("http://gantry.example.org:80/", "http://gantry.example.org"),
            ("https://gantry.example.org:8443", "https://gantry.example.org:8443"),
            ("http://[::1]:3000", "http://[::1]:3000"),
        ] {
            assert_eq!(serve_args(&["--public-origin", given]).unwrap().public_origin.as_deref(), Some(origin), "{given}");
        }
        // Anything that is not scheme://host[:port] stops the start, saying why.
        for bad in ["gantry.example.org", "https://gantry.example.org/app", "https://gantry.example.org/?x=1", "ftp://gantry.example.org", "https://user@gantry.example.org", "https://", ""] {
            let err = serve_args(&["--public-origin", bad]).err().unwrap_or_else(|| panic!("{bad:?} was accepted"));
            let text = err.to_string();
            assert!(text.contains("--public-origin") && text.contains("scheme://host[:port]"), "{bad:?}: {text}");
        }
    }
}
