//! Simulated nodes added by an admin over HTTP (`simulated://NAME`): ready
//! at once with their simulated GPUs, in the region chosen, labelled on the
//! Nodes page, and a machine created there runs on the simulated executor
//! (no Docker). Bad names and duplicates are refused and change nothing.

use crate::common;

use common::{count, login, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use gantry_platform::{
    accounts, catalogue,
    dispatch::{self, Dispatcher},
    fleet::Fleet,
    images, policy,
};
use reqwest::StatusCode;
use std::sync::Arc;

async fn post(
    client: &reqwest::Client,
    server: &TestServer,
    path: &str,
    form: &[(&str, &str)],
) -> (StatusCode, String) {
    let res = client.post(server.url(path)).form(form).send().await.unwrap();
    let status = res.status();
    (status, res.text().await.unwrap())
}

async fn add_node(
    client: &reqwest::Client,
    server: &TestServer,
    name: &str,
    region: &str,
    endpoint: &str,
    gpus: &str,
) -> (StatusCode, String) {
    let form = [
        ("name", name),
        ("region_code", region),
        ("endpoint", endpoint),
        ("gpu_count", gpus),
        ("gpu_model", ""),
        ("arch", "amd64"),
    ];
    post(client, server, "/api/admin/add_node", &form).await
}

gantry_testkit::timed_test! {
    async fn an_admin_adds_a_simulated_node_in_another_region_and_a_machine_runs_there() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let admin_id = count(&server.pool, "SELECT id FROM users WHERE username = 'admin'").await;
        catalogue::create_region(&server.pool, admin_id, "lab", "Lab", "").await.unwrap();
        images::create_image(&server.pool, None, "devbox", "gantry/devbox:latest", "demo", true).await.unwrap();
        let default_group = accounts::ensure_default_group(&server.pool).await.unwrap();
        policy::update_group_policy(&server.pool, None, default_group, 4, 8, &[]).await.unwrap();
        let admin = server.client();
        assert_eq!(login(&server, &admin, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);

        let nodes = count(&server.pool, "SELECT COUNT(*) FROM nodes").await;
        let audit = count(&server.pool, "SELECT COUNT(*) FROM audit_log").await;
        let long = format!("simulated://{}", "n".repeat(40));
        let bad = [
            ("Lab 2", "simulated://Lab 2", "lab", "node name may contain only"),
            ("", "simulated://", "lab", "node name is required"),
            ("", long.as_str(), "lab", "node name must be at most"),
            ("lab-3", "simulated://lab-2", "lab", "simulated://lab-3 for node lab-3"),
            ("lab-2", "simulated://lab-2", "mars", "region mars"),
        ];
        for (name, endpoint, region, message) in bad {
            let (status, body) = add_node(&admin, &server, name, region, endpoint, "2").await;
            assert!(status.is_client_error(), "{endpoint}: {status} {body}");
            assert!(body.contains(message), "{endpoint}: {body} should say {message}");
        }
        let (status, body) = add_node(&admin, &server, "lab-2", "lab", "simulated://lab-2", "99").await;
        assert!(status == StatusCode::BAD_REQUEST && body.contains("GPU count"), "{status} {body}");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM nodes").await, nodes, "nothing saved");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log").await, audit, "nothing audited");

        // An empty GPU count: the simulated default (4), the default model.
        let (status, body) = add_node(&admin, &server, "lab-2", "lab", "simulated://lab-2", "").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let node_id: i64 = body.trim().parse().unwrap();
        let (executor, endpoint, state, region): (String, String, String, String) = sqlx::query_as(
            "SELECT n.executor, n.docker_endpoint, n.state, r.code FROM nodes n JOIN regions r ON r.id = n.region_id WHERE n.id = ?",
        )
        .bind(node_id)
        .fetch_one(&server.pool)
        .await
        .unwrap();
        assert_eq!(
            (executor.as_str(), endpoint.as_str(), state.as_str(), region.as_str()),
            ("simulated", "simulated://lab-2", "ready", "lab")
        );
        assert_eq!(
            count(&server.pool, &format!("SELECT COUNT(*) FROM gpus WHERE node_id = {node_id} AND simulated = 1 AND model = 'SIM-A100-80GB'")).await,
            4
        );
        let detail: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'node.add' AND actor_id = ?")
            .bind(admin_id)
            .fetch_one(&server.pool)
            .await
            .unwrap();
        assert!(detail.contains("simulated node lab-2") && detail.contains("region lab"), "{detail}");

        // A duplicate, by name or by address, is refused with a clear message.
        let (status, body) = add_node(&admin, &server, "lab-2", "local", "simulated://lab-2", "1").await;
        assert!(status == StatusCode::CONFLICT && body.contains("a node named lab-2 exists already"), "{status} {body}");
        let (status, body) = add_node(&admin, &server, "", "local", " SIMULATED://lab-2/", "1").await;
        assert!(status == StatusCode::CONFLICT && body.contains("a node named lab-2 exists already"), "{status} {body}");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM nodes").await, nodes + 1);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log WHERE action = 'node.add'").await, 1);

        // Listed, ready, labelled a simulated node.
        let html = admin.get(server.url("/admin/nodes")).send().await.unwrap().text().await.unwrap();
        let row = html.split(r#"data-testid="node-row" data-name="lab-2""#).nth(1).and_then(|r| r.split("</tr>").next()).expect("lab-2 is listed");
        assert!(row.contains(r#"data-state="ready""#) || html.contains(r#"data-name="lab-2" data-state="ready""#), "{row}");
        assert!(row.contains(r#"data-testid="node-simulated""#) && row.contains("simulated://lab-2"), "{row}");
        assert!(row.contains("4 / 4") && row.contains("SIM-A100-80GB"), "{row}");

        // A machine goes there, and the simulated executor runs it.
        server.add_user("alice", "a-good-password", Role::User).await;
        let alice = server.client();
        assert_eq!(login(&server, &alice, "alice", "a-good-password").await.status(), StatusCode::OK);
        let form = [("name", "box-1"), ("image_id", ""), ("gpu_count", "2"), ("gpu_model", ""), ("volume_size_gb", "10")];
        let (status, body) = post(&alice, &server, "/api/create_machine", &form).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let created: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(created["node"], "lab-2");
        let machine = created["machine_id"].as_i64().unwrap();
        let dispatcher = Dispatcher::new(server.pool.clone(), Fleet::new(), Arc::new(tokio::sync::Notify::new()), 4);
        for task in dispatch::claim(&server.pool, &dispatcher.owner, 16).await.unwrap() {
            dispatcher.execute(task).await;
        }
        let state: String =
            sqlx::query_scalar("SELECT state FROM machines WHERE id = ?").bind(machine).fetch_one(&server.pool).await.unwrap();
        assert_eq!(state, "running");
        assert_eq!(count(&server.pool, &format!("SELECT COUNT(*) FROM machine_gpus mg JOIN gpus g ON g.id = mg.gpu_id WHERE mg.machine_id = {machine} AND g.node_id = {node_id}")).await, 2);
    }
}
