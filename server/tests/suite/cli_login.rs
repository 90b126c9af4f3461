//! `gantry login` against a real server: the password (on standard
//! input) gets a personal API token from `POST /api/v1/login`, stored with
//! the URL in GANTRY_CONFIG_DIR/credentials.json, readable by the user
//! alone (0600 in a 0700 directory); a wrong password exits non-zero with
//! the server's words and stores nothing; `--token` keeps a token made on
//! the portal (a bad one refused); the stored token serves the other
//! commands, whose `--json` output parses; `logout` forgets it.

use crate::cli_support::{start, PASSWORD};
use gantry_server::cli::config_store;
use reqwest::StatusCode;

gantry_testkit::timed_test! {
    limit = 180;
    async fn login_stores_a_private_token_and_a_wrong_password_stores_nothing() {
        let (s, alice) = start("simulated").await;

        // A wrong password: non-zero, the server's words, no file, no token.
        let wrong = s.cli(&["login", &s.url, "--username", "alice", "--password-stdin"], "not-her-password\n").await;
        assert!(!wrong.ok, "{wrong:?}");
        assert!(wrong.stderr.contains("wrong username or password"), "{wrong:?}");
        assert!(!s.credentials().exists(), "nothing stored");
        assert_eq!(count(&s.pool, "SELECT COUNT(*) FROM api_tokens").await, 0);
        // An unknown user reads the same.
        let unknown = s.cli(&["login", &s.url, "--username", "nobody", "--password-stdin"], "whatever-pw\n").await;
        assert!(!unknown.ok && unknown.stderr.contains("wrong username or password"), "{unknown:?}");

        // The right one, the username asked for on standard input too.
        let run = s.cli(&["login", &s.url], &format!("alice\n{PASSWORD}\n")).await;
        assert!(run.ok, "{run:?}");
        let path = s.credentials();
        assert_eq!(config_store::mode(&path).unwrap(), 0o600, "the token is the user's alone");
        assert_eq!(config_store::mode(&s.config_dir()).unwrap(), 0o700);
        let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(stored["url"].as_str(), Some(format!("{}/", s.url).as_str()));
        let token = stored["token"].as_str().unwrap().to_string();
        assert!(token.starts_with("gnt_"), "{stored}");
        let owner: i64 = sqlx::query_scalar("SELECT user_id FROM api_tokens").fetch_one(&s.pool).await.unwrap();
        assert_eq!(owner, alice.id, "a token of alice's own, listed on her Tokens page");

        // The stored token serves the other commands; --json parses.
        let tasks = s.cli(&["compute", "ls", "--json"], "").await;
        assert!(tasks.ok, "{tasks:?}");
        assert_eq!(tasks.json(), serde_json::json!([]));
        let datasets = s.cli(&["datasets", "ls", "--json"], "").await;
        assert!(datasets.ok && datasets.json().is_array(), "{datasets:?}");
        let table = s.cli(&["compute", "ls"], "").await;
        assert!(table.ok && table.stdout.starts_with("ID"), "{table:?}");

        // A token pasted from the portal: checked first; a bad one refused, nothing changed.
        let bad = s.cli(&["login", &s.url, "--token", "gnt_0000"], "").await;
        assert!(!bad.ok && bad.stderr.contains("401"), "{bad:?}");
        assert!(std::fs::read_to_string(&path).unwrap().contains(&token), "the old credentials kept");
        let pasted = s.cli(&["login", &s.url, "--token", &token], "").await;
        assert!(pasted.ok, "{pasted:?}");
        assert_eq!(config_store::mode(&path).unwrap(), 0o600);

        // --scope read: a token that reads but does not write.
        let read = s.cli(&["login", &s.url, "--username", "alice", "--password-stdin", "--scope", "read"], &format!("{PASSWORD}\n")).await;
        assert!(read.ok, "{read:?}");
        let scope: String = sqlx::query_scalar("SELECT scope FROM api_tokens ORDER BY id DESC LIMIT 1").fetch_one(&s.pool).await.unwrap();
        assert_eq!(scope, "read");
        let refused = s.cli(&["compute", "cancel", "1"], "").await;
        assert!(!refused.ok && refused.stderr.contains("insufficient_scope"), "{refused:?}");

        // --url/--token override what is stored; no server there is a clear error.
        let elsewhere = s.cli(&["compute", "ls", "--url", "http://127.0.0.1:9"], "").await;
        assert!(!elsewhere.ok && elsewhere.stderr.contains("cannot reach http://127.0.0.1:9/"), "{elsewhere:?}");
        let revoked = s.cli_env(&["compute", "ls"], "", &[("GANTRY_TOKEN", "gnt_nothing")]).await;
        assert!(!revoked.ok && revoked.stderr.contains("gantry login"), "{revoked:?}");

        // Logout forgets it; the commands then say how to sign in.
        let out = s.cli(&["logout"], "").await;
        assert!(out.ok && !path.exists(), "{out:?}");
        let after = s.cli(&["compute", "ls"], "").await;
        assert!(!after.ok && after.stderr.contains("not signed in"), "{after:?}");
    }
}

gantry_testkit::timed_test! {
    limit = 180;
    async fn the_login_route_answers_in_the_apis_shape_and_is_throttled_as_a_sign_in() {
        let (s, _) = start("simulated").await;
        let http = reqwest::Client::new();
        let url = format!("{}/api/v1/login", s.url);
        let body = |pw: &str| serde_json::json!({ "username": "alice", "password": pw, "token_name": "ci" });

        let res = http.get(&url).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
        let res = http.post(&url).body("not json").header("content-type", "application/json").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);

        let res = http.post(&url).json(&body(PASSWORD)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let made: serde_json::Value = res.json().await.unwrap();
        assert_eq!((made["name"].as_str(), made["scope"].as_str()), (Some("ci"), Some("write")), "{made}");
        let res = http.get(format!("{}/api/v1/compute-tasks", s.url)).bearer_auth(made["token"].as_str().unwrap()).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "the token works");

        // Wrong passwords: 401 each, until the sign-in throttle answers 429
        // with Retry-After — then even the right one is refused, and no
        // token is made.
        let mut throttled = None;
        for _ in 0..30 {
            let res = http.post(&url).json(&body("wrong-password")).send().await.unwrap();
            if res.status() == StatusCode::TOO_MANY_REQUESTS {
                throttled = Some(res);
                break;
            }
            assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
            let text: serde_json::Value = res.json().await.unwrap();
            assert_eq!(text["code"], "bad_credentials", "{text}");
            assert!(text["error"].as_str().unwrap().contains("wrong username or password"), "{text}");
        }
        let throttled = throttled.expect("the sign-in throttle counts API logins");
        assert!(throttled.headers().contains_key("retry-after"));
        let res = http.post(&url).json(&body(PASSWORD)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(count(&s.pool, "SELECT COUNT(*) FROM api_tokens").await, 1, "only the first");
        assert!(count(&s.pool, "SELECT COUNT(*) FROM audit_log WHERE action = 'auth.sign_in_failed'").await > 0);
    }
}

async fn count(pool: &gantry_platform::db::Pool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}
