//! The JSON API for scripts over real HTTP: tokens (made, used, revoked),
//! group isolation, bad submissions refused with nothing written.

use crate::common;

use common::{count, TestServer};
use gantry_core::Role;
use gantry_platform::{accounts, catalogue, cluster, gpus, tokens};
use reqwest::StatusCode;
use serde_json::{json, Value};

async fn user(server: &TestServer, name: &str, group: &str) -> accounts::User {
    accounts::create_user(
        &server.pool,
        None,
        accounts::NewUser { username: name, password: "a-good-password", role: Role::User, group: Some(group) },
    )
    .await
    .unwrap()
}

fn task(framework: &str) -> Value {
    json!({
        "name": "train", "framework": framework, "framework_version": "2.4",
        "interpreter": "Python", "interpreter_version": "3.11", "command": ["echo", "hi"], "gpus": 1
    })
}

gantry_testkit::timed_test! {
    async fn the_compute_api_needs_a_live_token_and_keeps_groups_apart() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_group(&server.pool, None, "ml", 4).await.unwrap();
        accounts::create_group(&server.pool, None, "other", 4).await.unwrap();
        let alice = user(&server, "alice", "ml").await;
        let carol = user(&server, "carol", "other").await;
        let image = catalogue::create_region_image(&server.pool, alice.id, "local", "gantry/devbox:latest", "amd64", "training").await.unwrap();
        let master = catalogue::create_master_image(
            &server.pool,
            alice.id,
            &catalogue::NewMasterImage { name: "torch", interpreter: "Python", interpreter_version: "3.11", framework: "PyTorch", framework_version: "2.4" },
        )
        .await
        .unwrap();
        catalogue::set_link(&server.pool, alice.id, master, image.id, true).await.unwrap();
        let (_, alice_token) = tokens::create(&server.pool, &alice, "laptop").await.unwrap();
        let (_, carol_token) = tokens::create(&server.pool, &carol, "ci").await.unwrap();
        let http = reqwest::Client::new();
        let url = |p: &str| server.url(p);

        // No token, a wrong one, or a malformed header: 401 and nothing written.
        let res = http.post(url("/api/v1/compute-tasks")).json(&task("PyTorch")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert!(res.text().await.unwrap().contains("API token"));
        for bad in ["Bearer gnt_0000", "Basic abc", &format!("Bearer {}x", &alice_token[..alice_token.len() - 1])] {
            let res = http.get(url("/api/v1/compute-tasks")).header("Authorization", bad).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{bad}");
        }
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM compute_tasks").await, 0);

        // Submitted with a token: the decision is in the answer (no node is
        // ready in this test server, so the task waits, with the reason).
        let res = http.post(url("/api/v1/compute-tasks")).bearer_auth(&alice_token).json(&task("PyTorch")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let raw = res.text().await.unwrap();
        // Each key once: strict JSON readers refuse an object with a key twice.
        for key in ["\"command\":", "\"decision\":"] {
            assert_eq!(raw.matches(key).count(), 1, "{key} in {raw}");
        }
        let body: Value = serde_json::from_str(&raw).unwrap();
        let id = body["id"].as_i64().unwrap();
        assert_eq!(body["state"], "pending");
        assert_eq!(body["decision"]["image_set"], json!(["local"]));
        assert_eq!(body["command"], json!(["echo", "hi"]));
        assert!(body["message"].as_str().unwrap().starts_with("regions with a matching image: local; none has"), "{body}");

        // Its owner sees it; another group's token gets 404, and an empty list.
        let res = http.get(url(&format!("/api/v1/compute-tasks/{id}"))).bearer_auth(&alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        // The scheme is case-insensitive (RFC 9110).
        let res = http.get(url(&format!("/api/v1/compute-tasks/{id}"))).header("Authorization", format!("bearer {alice_token}")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let res = http.get(url(&format!("/api/v1/compute-tasks/{id}"))).bearer_auth(&carol_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        let res = http.get(url(&format!("/api/v1/compute-tasks/{id}/logs"))).bearer_auth(&carol_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        let list: Value = http.get(url("/api/v1/compute-tasks")).bearer_auth(&carol_token).send().await.unwrap().json().await.unwrap();
        assert_eq!(list, json!([]));
        let res = http.post(url(&format!("/api/v1/compute-tasks/{id}/cancel"))).bearer_auth(&carol_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);

        // Bad submissions: 400, nothing written.
        let before = count(&server.pool, "SELECT COUNT(*) FROM compute_tasks").await;
        let mut both = task("PyTorch");
        both["shell"] = json!("echo hi");
        let mut zero = task("PyTorch");
        zero["gpus"] = json!(0);
        let mut bad_name = task("PyTorch");
        bad_name["name"] = json!("Bad Name!");
        // Few bytes, but a huge list of arguments.
        let mut many = task("PyTorch");
        many["command"] = json!(std::iter::once("echo").chain(std::iter::repeat_n("", 5_000)).collect::<Vec<_>>());
        for (what, body) in [("both command and shell", both), ("zero GPUs", zero), ("bad name", bad_name), ("unknown field", json!({"nme": 1})), ("5,001 arguments", many)] {
            let res = http.post(url("/api/v1/compute-tasks")).bearer_auth(&alice_token).json(&body).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{what}");
        }
        let res = http.post(url("/api/v1/compute-tasks")).bearer_auth(&alice_token).body("not json").header("content-type", "application/json").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        // CPUs are refused in CPUs (the platform's own check counts thousandths).
        for cpus in [0.05, 300.0] {
            let mut odd = task("PyTorch");
            odd["cpus"] = json!(cpus);
            let res = http.post(url("/api/v1/compute-tasks")).bearer_auth(&alice_token).json(&odd).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST);
            assert!(res.text().await.unwrap().contains("cpus must be a number between 0.1 and 256"), "{cpus}");
        }
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM compute_tasks").await, before);

        // No matching image: rejected at once with the versions.
        let res = http.post(url("/api/v1/compute-tasks")).bearer_auth(&alice_token).json(&task("JAX")).send().await.unwrap();
        let body: Value = res.json().await.unwrap();
        assert_eq!((body["state"].as_str(), body["message"].as_str()), (Some("failed"), Some("no image matches framework JAX 2.4 / interpreter Python 3.11")));

        // The owner cancels; a revoked token stops working at once.
        let res = http.post(url(&format!("/api/v1/compute-tasks/{id}/cancel"))).bearer_auth(&alice_token).send().await.unwrap();
        assert_eq!(res.json::<Value>().await.unwrap()["state"], "cancelled");
        let token_id: i64 = sqlx::query_scalar("SELECT id FROM api_tokens WHERE user_id = ?").bind(alice.id).fetch_one(&server.pool).await.unwrap();
        tokens::revoke(&server.pool, &alice, token_id).await.unwrap();
        assert!(tokens::revoke(&server.pool, &carol, token_id).await.is_err(), "not carol's to revoke");
        let res = http.get(url("/api/v1/compute-tasks")).bearer_auth(&alice_token).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        let stored: String = sqlx::query_scalar("SELECT secret_hash FROM api_tokens WHERE id = ?").bind(token_id).fetch_one(&server.pool).await.unwrap();
        assert!(!stored.contains(&alice_token[4..]) && stored.len() == 64, "only a hash is stored");
    }
}

gantry_testkit::timed_test! {
    async fn a_disabled_or_reset_account_cannot_use_its_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_group(&server.pool, None, "ml", 4).await.unwrap();
        let alice = user(&server, "alice", "ml").await;
        let admin: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = 'admin'").fetch_one(&server.pool).await.unwrap();
        let (_, token) = tokens::create(&server.pool, &alice, "laptop").await.unwrap();
        let http = reqwest::Client::new();
        let list = |token: String| {
            let (http, url) = (http.clone(), server.url("/api/v1/compute-tasks"));
            async move { http.get(url).bearer_auth(token).send().await.unwrap().status() }
        };
        assert_eq!(list(token.clone()).await, StatusCode::OK);

        // Disabled: the token answers 401 (as the account's sessions do) and writes nothing.
        accounts::set_disabled(&server.pool, admin, alice.id, true).await.unwrap();
        assert_eq!(list(token.clone()).await, StatusCode::UNAUTHORIZED, "a disabled account's token");
        let res = http.post(server.url("/api/v1/compute-tasks")).bearer_auth(&token).json(&task("PyTorch")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM compute_tasks").await, 0);
        // Enabled again: the token stays revoked (disabling revoked it, audited).
        accounts::set_disabled(&server.pool, admin, alice.id, false).await.unwrap();
        assert_eq!(list(token.clone()).await, StatusCode::UNAUTHORIZED, "enabled again, the token is not revived");
        let detail: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'user.disable'").fetch_one(&server.pool).await.unwrap();
        assert!(detail.contains("1 API token(s) revoked"), "{detail}");
        let alice = accounts::user_by_id(&server.pool, alice.id).await.unwrap().unwrap();
        let (_, token) = tokens::create(&server.pool, &alice, "laptop again").await.unwrap();
        assert_eq!(list(token.clone()).await, StatusCode::OK, "a new one works");

        // An admin's password reset revokes the account's tokens, audited.
        accounts::reset_password(&server.pool, admin, alice.id, "temporary-password-1").await.unwrap();
        assert_eq!(list(token.clone()).await, StatusCode::UNAUTHORIZED, "after a reset");
        let live = format!("SELECT COUNT(*) FROM api_tokens WHERE user_id = {} AND revoked_at IS NULL", alice.id);
        assert_eq!(count(&server.pool, &live).await, 0);
        let detail: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'user.reset_password'").fetch_one(&server.pool).await.unwrap();
        assert!(detail.contains("1 API token(s) revoked"), "{detail}");
        // A token asked for by a session from before the reset is not made
        // (platform test `accounts_races` has the interleaving).
        assert!(tokens::create(&server.pool, &alice, "new laptop").await.is_err());
        // Until the temporary password is replaced, no token of the account
        // works (one made once it was, with the flag set again by hand).
        sqlx::query("UPDATE users SET must_change_password = 0 WHERE id = ?").bind(alice.id).execute(&server.pool).await.unwrap();
        let alice = accounts::user_by_id(&server.pool, alice.id).await.unwrap().unwrap();
        let (_, fresh) = tokens::create(&server.pool, &alice, "new laptop").await.unwrap();
        sqlx::query("UPDATE users SET must_change_password = 1 WHERE id = ?").bind(alice.id).execute(&server.pool).await.unwrap();
        assert_eq!(list(fresh.clone()).await, StatusCode::UNAUTHORIZED, "a temporary password still to replace");
        sqlx::query("UPDATE users SET must_change_password = 0 WHERE id = ?").bind(alice.id).execute(&server.pool).await.unwrap();
        assert_eq!(list(fresh).await, StatusCode::OK);
        assert_eq!(list(token).await, StatusCode::UNAUTHORIZED, "the revoked one stays revoked");
    }
}

gantry_testkit::timed_test! {
    async fn a_gpu_model_no_gpu_has_is_refused_with_the_models_there_are() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_group(&server.pool, None, "ml", 4).await.unwrap();
        let alice = user(&server, "alice", "ml").await;
        let found = gpus::simulated("gpu-box", &gpus::SimulatedGpus { count: 2, model: "A100".into(), memory_mb: 81_920 });
        let node = cluster::NodeRegistration {
            name: "gpu-box", region_code: "local", docker_endpoint: "simulated://gpu-box", volume_dir: "", executor: "simulated", cpu_count: 2, memory_mb: 1024, gpus: &found,
        };
        cluster::register_node(&server.pool, node).await.unwrap();
        let (_, token) = tokens::create(&server.pool, &alice, "laptop").await.unwrap();

        // Models match exactly: the wrong case is refused too, with a hint.
        let mut body = task("PyTorch");
        body["gpu_model"] = json!("a100");
        let res = reqwest::Client::new().post(server.url("/api/v1/compute-tasks")).bearer_auth(&token).json(&body).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        let body: Value = res.json().await.unwrap();
        let why = body["error"].as_str().unwrap();
        assert!(why.contains("the cluster has A100") && why.ends_with("did you mean \"A100\"?"), "{why}");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM compute_tasks").await, 0, "nothing recorded");
    }
}

gantry_testkit::timed_test! {
    async fn the_task_list_pages_with_limit_and_before() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_group(&server.pool, None, "ml", 4).await.unwrap();
        accounts::create_group(&server.pool, None, "other", 4).await.unwrap();
        let alice = user(&server, "alice", "ml").await;
        let carol = user(&server, "carol", "other").await;
        for (i, who) in [&alice, &alice, &carol, &alice, &alice, &alice].into_iter().enumerate() {
            sqlx::query(
                "INSERT INTO compute_tasks (name, requester_id, group_id, framework, framework_version, interpreter, interpreter_version, command,
                                            gpu_count, cpu_millis, memory_mb, time_limit_secs, state, created_at, updated_at)
                 VALUES (?, ?, ?, 'PyTorch', '2.4', 'Python', '3.11', '[\"true\"]', 1, 1000, 1024, 60, 'pending', 0, 0)",
            )
            .bind(format!("t{i}"))
            .bind(who.id)
            .bind(who.group_id)
            .execute(&server.pool)
            .await
            .unwrap();
        }
        let (_, token) = tokens::create(&server.pool, &alice, "laptop").await.unwrap();
        let http = reqwest::Client::new();
        let get = |query: &str| http.get(server.url(&format!("/api/v1/compute-tasks{query}"))).bearer_auth(&token).send();
        let names = |list: Value| list.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();

        // Without parameters: every task of the group, newest first, as before.
        let all: Value = get("").await.unwrap().json().await.unwrap();
        assert_eq!(names(all.clone()), ["t5", "t4", "t3", "t1", "t0"]);
        assert!(all[0]["decision"].is_null() && all[0]["command"] == json!(["true"]), "the same shape: {all}");
        // A page of two, then the two before the last one seen.
        let first: Value = get("?limit=2").await.unwrap().json().await.unwrap();
        assert_eq!(names(first.clone()), ["t5", "t4"]);
        let next: Value = get(&format!("?limit=2&before={}", first[1]["id"])).await.unwrap().json().await.unwrap();
        assert_eq!(names(next.clone()), ["t3", "t1"], "carol's task is not alice's to see");
        let last: Value = get(&format!("?limit=2&before={}", next[1]["id"])).await.unwrap().json().await.unwrap();
        assert_eq!(names(last), ["t0"]);

        // Bad values: 400 with the rule, as JSON.
        for bad in ["?limit=0", "?limit=501", "?limit=abc", "?before=x"] {
            let res = get(bad).await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bad}");
            let body: Value = res.json().await.unwrap();
            assert!(body["error"].as_str().is_some_and(|e| e.contains("limit") || e.contains("before")), "{bad}: {body}");
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_malformed_path_or_query_is_the_apis_json_400_after_the_token_check() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_group(&server.pool, None, "ml", 4).await.unwrap();
        let alice = user(&server, "alice", "ml").await;
        let (_, token) = tokens::create(&server.pool, &alice, "laptop").await.unwrap();
        let http = reqwest::Client::new();
        let paths = [
            ("GET", "/api/v1/compute-tasks/abc"),
            ("GET", "/api/v1/compute-tasks/9223372036854775808"),
            ("GET", "/api/v1/compute-tasks/abc/logs"),
            ("POST", "/api/v1/compute-tasks/-/cancel"),
            ("GET", "/api/v1/compute-tasks?limit=1&limit=2"),
            // The datasets API answers the same way (it gave axum's plain text, before the token).
            ("GET", "/api/v1/datasets?q=a&q=b"),
            ("PUT", "/api/v1/datasets/coco/versions/v1/files/a.bin?replace=1&replace=2"),
            ("GET", "/api/v1/datasets/%FF/versions/v1/files"),
        ];
        for (method, path) in paths {
            let req = |with_token: bool| {
                let r = http.request(method.parse().unwrap(), server.url(path));
                if with_token { r.bearer_auth(&token) } else { r }
            };
            // No token: that is all a caller without one learns.
            assert_eq!(req(false).send().await.unwrap().status(), StatusCode::UNAUTHORIZED, "{method} {path}");
            let res = req(true).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{method} {path}");
            let body: Value = res.json().await.unwrap_or_else(|e| panic!("{method} {path}: not JSON: {e}"));
            assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{method} {path}: {body}");
        }
    }
}
