//! Snapshots, reclaim and rebalancing over real HTTP: who may see and touch
//! what (another group: 404; a group member who is not the owner: 409),
//! bad input refused with nothing written, and the admin's audited
//! settings (403 for users, 400 for bad values).

use crate::common;

use common::{count, login, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use gantry_platform::{
    accounts,
    cluster::{self, NodeRegistration},
    gpus::{self, SimulatedGpus},
    images, policy,
};
use reqwest::StatusCode;
use serde_json::Value;

async fn setup(server: &TestServer) {
    let found = gpus::simulated("node-s", &SimulatedGpus { count: 4, model: "SIM-A100".into(), memory_mb: 1024 });
    cluster::register_node(
        &server.pool,
        NodeRegistration {
            name: "node-s",
            region_code: "local",
            docker_endpoint: "simulated://node-s",
            volume_dir: "",
            executor: "simulated",
            cpu_count: 4,
            memory_mb: 0,
            gpus: &found,
        },
    )
    .await
    .unwrap();
    images::create_image(&server.pool, None, "devbox", "gantry/devbox:latest", "demo", true).await.unwrap();
    let default_group = accounts::ensure_default_group(&server.pool).await.unwrap();
    policy::update_group_policy(&server.pool, None, default_group, 4, 4, &[]).await.unwrap();
    accounts::create_group(&server.pool, None, "other", 4).await.unwrap();
    for (name, group) in [("alice", "default"), ("bob", "default"), ("carol", "other")] {
        accounts::create_user(
            &server.pool,
            None,
            accounts::NewUser { username: name, password: "a-good-password", role: Role::User, group: Some(group) },
        )
        .await
        .unwrap();
    }
}

async fn signed_in(server: &TestServer, user: &str, password: &str) -> reqwest::Client {
    let client = server.client();
    assert_eq!(login(server, &client, user, password).await.status(), StatusCode::OK, "{user} signs in");
    client
}

async fn post(
    server: &TestServer,
    client: &reqwest::Client,
    path: &str,
    form: &[(&str, &str)],
) -> (StatusCode, String) {
    let res = client.post(server.url(path)).form(form).send().await.unwrap();
    let status = res.status();
    (status, res.text().await.unwrap())
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

gantry_testkit::timed_test! {
    async fn snapshots_and_reclaim_are_visible_to_the_group_and_touched_by_the_owner() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        setup(&server).await;
        let alice = signed_in(&server, "alice", "a-good-password").await;
        let bob = signed_in(&server, "bob", "a-good-password").await;
        let carol = signed_in(&server, "carol", "a-good-password").await;
        let admin = signed_in(&server, "admin", ADMIN_PASSWORD).await;

        let (status, body) = post(&server, &alice, "/api/create_machine",
            &[("name", "box"), ("image_id", ""), ("gpu_count", "1"), ("gpu_model", ""), ("volume_size_gb", "1")]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let id = json(&body)["machine_id"].as_i64().unwrap().to_string();
        // This server runs no dispatcher: the create is done by hand.
        sqlx::query("UPDATE machines SET state = 'running' WHERE id = ?").bind(&id).execute(&server.pool).await.unwrap();
        sqlx::query("UPDATE tasks SET state = 'succeeded' WHERE machine_id = ?").bind(&id).execute(&server.pool).await.unwrap();

        // Bad input: refused, nothing written.
        let (status, _) = post(&server, &alice, "/api/take_snapshot", &[("machine_id", &id), ("name", "   ")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM snapshots").await, 0);

        // Another group: not found; a group member who is not the owner: refused.
        let (status, _) = post(&server, &carol, "/api/take_snapshot", &[("machine_id", &id), ("name", "mine now")]).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, body) = post(&server, &bob, "/api/take_snapshot", &[("machine_id", &id), ("name", "bobs")]).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("only the machine's owner"), "{body}");

        let (status, body) = post(&server, &alice, "/api/take_snapshot", &[("machine_id", &id), ("name", "first")]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let snap = json(&body).as_i64().unwrap().to_string();
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tasks WHERE kind = 'snapshot' AND state = 'scheduled'").await, 1, "a task");
        // A second one while the first runs: the machine is busy.
        let (status, body) = post(&server, &alice, "/api/take_snapshot", &[("machine_id", &id), ("name", "second")]).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        sqlx::query("UPDATE snapshots SET state = 'ready'").execute(&server.pool).await.unwrap();
        sqlx::query("UPDATE tasks SET state = 'succeeded' WHERE kind = 'snapshot'").execute(&server.pool).await.unwrap();

        let (_, body) = post(&server, &bob, "/api/list_snapshots", &[]).await;
        assert_eq!(json(&body)[0]["name"], "first", "the group sees it");
        let (_, body) = post(&server, &carol, "/api/list_snapshots", &[]).await;
        assert_eq!(json(&body), serde_json::json!([]), "another group does not");
        // The machine page's card: this machine's snapshots, for its group only.
        let (_, body) = post(&server, &bob, "/api/machine_snapshots", &[("machine_id", &id)]).await;
        assert_eq!(json(&body)[0]["name"], "first", "{body}");
        let other = (id.parse::<i64>().unwrap() + 1000).to_string();
        let (_, body) = post(&server, &bob, "/api/machine_snapshots", &[("machine_id", &other)]).await;
        assert_eq!(json(&body), serde_json::json!([]), "another machine's card lists none of them");
        let (_, body) = post(&server, &carol, "/api/machine_snapshots", &[("machine_id", &id)]).await;
        assert_eq!(json(&body), serde_json::json!([]), "another group's card lists none");
        for (path, form) in [
            ("/api/delete_snapshot", vec![("snapshot_id", snap.as_str())]),
            ("/api/machine_from_snapshot", vec![("snapshot_id", snap.as_str()), ("name", "stolen"), ("gpu_count", "1"), ("volume_size_gb", "1")]),
            ("/api/machine_reclaim", vec![("machine_id", id.as_str())]),
            ("/api/extend_reclaim", vec![("machine_id", id.as_str())]),
            ("/api/restore_machine", vec![("machine_id", id.as_str())]),
            ("/api/rebalance_opt_out", vec![("machine_id", id.as_str()), ("opt_out", "on")]),
        ] {
            let (status, body) = post(&server, &carol, path, &form).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        }
        let (status, _) = post(&server, &bob, "/api/delete_snapshot", &[("snapshot_id", &snap)]).await;
        assert_eq!(status, StatusCode::CONFLICT, "only its owner deletes it");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM snapshots").await, 1);

        // A warning shows in the owner's group banner with the time left.
        let deadline = gantry_platform::now() + 600;
        sqlx::query("UPDATE machines SET reclaim_deadline = ? WHERE id = ?").bind(deadline).bind(&id).execute(&server.pool).await.unwrap();
        let (_, body) = post(&server, &alice, "/api/reclaim_notices", &[]).await;
        let notice = &json(&body)[0];
        assert_eq!(notice["machine_name"], "box");
        let alice_id = count(&server.pool, "SELECT id FROM users WHERE username = 'alice'").await;
        assert!(notice["deadline"] == deadline && notice["owner_id"] == alice_id && notice["state"] == "running", "{notice}");
        let (_, body) = post(&server, &carol, "/api/reclaim_notices", &[]).await;
        assert_eq!(json(&body), serde_json::json!([]));
        let (status, body) = post(&server, &bob, "/api/extend_reclaim", &[("machine_id", &id)]).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        let (status, body) = post(&server, &alice, "/api/extend_reclaim", &[("machine_id", &id)]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(count(&server.pool, &format!("SELECT reclaim_extensions FROM machines WHERE id = {id}")).await, 1);
        // Restore of a machine that was not reclaimed: refused with the state.
        let (status, body) = post(&server, &alice, "/api/restore_machine", &[("machine_id", &id)]).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("running; restore is not possible"), "{body}");
        let (status, _) = post(&server, &alice, "/api/rebalance_opt_out", &[("machine_id", &id), ("opt_out", "on")]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(count(&server.pool, &format!("SELECT rebalance_opt_out FROM machines WHERE id = {id}")).await, 1);

        // Settings: admins only, checked before anything is written, audited.
        let good = [("enabled", "on"), ("threshold_pct", "7"), ("window_min", "1"), ("grace_min", "2"), ("extensions_allowed", "3"),
            ("extension_min", "5"), ("hot_enabled", "on"), ("hot_util_pct", "90"), ("hot_mem_pct", "95"), ("hot_temp_c", "85"), ("hot_window_min", "10")];
        let (status, _) = post(&server, &alice, "/api/save_reclaim_settings", &good).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, _) = post(&server, &alice, "/api/reclaim_admin", &[]).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let mut bad = good.to_vec();
        bad[2] = ("window_min", "0");
        let (status, body) = post(&server, &admin, "/api/save_reclaim_settings", &bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("window"), "{body}");
        assert_eq!(count(&server.pool, "SELECT window_secs FROM reclaim_settings").await, 7200, "nothing changed");
        let (status, body) = post(&server, &admin, "/api/save_reclaim_settings", &good).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(count(&server.pool, "SELECT window_secs FROM reclaim_settings").await, 60);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log WHERE action = 'reclaim.settings'").await, 1);
        let (status, body) = post(&server, &admin, "/api/reclaim_admin", &[]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let page = json(&body);
        assert_eq!(page["reclaim"]["extensions_allowed"], 3);
        assert_eq!(page["machines"][0]["rebalance_opt_out"], true, "the admin sees the opt-out");
        assert_eq!(page["counts"]["page"], 1, "{body}");
        assert_eq!(page["counts"]["total"].as_i64(), Some(page["machines"].as_array().unwrap().len() as i64), "{body}");
    }
}
