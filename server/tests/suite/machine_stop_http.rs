//! Stop and Start over HTTP, as the machine page's forms post them without
//! JavaScript: the owner's stop puts the machine away (its page then reads
//! "shut down" and offers Start), the start brings it back; another group's
//! user is answered 404 and nothing changes. Tasks run on a simulated node
//! through a dispatcher of the test's own.

use crate::common;

use common::{count, login, TestServer};
use gantry_core::Role;
use gantry_platform::{
    accounts,
    cluster::{self, NodeRegistration},
    dispatch::{self, Dispatcher},
    fleet::Fleet,
    gpus::{self, SimulatedGpus},
    images, policy,
};
use reqwest::{header, StatusCode};
use std::sync::Arc;

/// What a browser without JavaScript accepts (server functions redirect it).
const HTML: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

async fn cluster(server: &TestServer) {
    let found = gpus::simulated("node-a", &SimulatedGpus { count: 2, model: "SIM-A100".into(), memory_mb: 1024 });
    let registration = NodeRegistration {
        name: "node-a",
        region_code: "local",
        docker_endpoint: "simulated://node-a",
        volume_dir: "",
        executor: "simulated",
        cpu_count: 4,
        memory_mb: 0,
        gpus: &found,
    };
    cluster::register_node(&server.pool, registration).await.unwrap();
    images::create_image(&server.pool, None, "devbox", "gantry/devbox:latest", "demo", true).await.unwrap();
    let default_group = accounts::ensure_default_group(&server.pool).await.unwrap();
    policy::update_group_policy(&server.pool, None, default_group, 2, 2, &[]).await.unwrap();
}

async fn signed_in(server: &TestServer, name: &str, group: &str) -> reqwest::Client {
    let user = accounts::NewUser { username: name, password: "a-good-password", role: Role::User, group: Some(group) };
    accounts::create_user(&server.pool, None, user).await.unwrap();
    let client = server.client();
    assert_eq!(login(server, &client, name, "a-good-password").await.status(), StatusCode::OK);
    client
}

/// Runs every due task on the simulated node (one dispatcher for the
/// test: its fleet holds the simulated engine's containers).
async fn drive(server: &TestServer, dispatcher: &Dispatcher) {
    loop {
        let claimed = dispatch::claim(&server.pool, &dispatcher.owner, 16).await.unwrap();
        if claimed.is_empty() {
            return;
        }
        for task in claimed {
            dispatcher.execute(task).await;
        }
    }
}

/// Posts the machine page's form to `function` as a browser without
/// JavaScript does; the status, and the page it is sent back to.
async fn post_form(
    server: &TestServer,
    client: &reqwest::Client,
    function: &str,
    machine: i64,
) -> (StatusCode, String) {
    let page = server.url(&format!("/machines/{machine}"));
    let res = client
        .post(server.url(&format!("/api/{function}")))
        .header(header::ACCEPT, HTML)
        .header(header::REFERER, &page)
        .form(&[("machine_id", machine.to_string())])
        .send()
        .await
        .unwrap();
    let status = res.status();
    if status != StatusCode::FOUND {
        return (status, res.text().await.unwrap());
    }
    (status, client.get(&page).send().await.unwrap().text().await.unwrap())
}

async fn state(server: &TestServer, machine: i64) -> String {
    sqlx::query_scalar("SELECT state FROM machines WHERE id = ?").bind(machine).fetch_one(&server.pool).await.unwrap()
}

gantry_testkit::timed_test! {
    async fn the_owner_stops_and_starts_a_machine_from_its_page_and_another_group_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        cluster(&server).await;
        let dispatcher = Dispatcher::new(server.pool.clone(), Fleet::new(), Arc::new(tokio::sync::Notify::new()), 4);
        accounts::create_group(&server.pool, None, "other", 4).await.unwrap();
        let alice = signed_in(&server, "alice", "default").await;
        let carol = signed_in(&server, "carol", "other").await;
        let form = [("name", "box-1"), ("image_id", ""), ("gpu_count", "2"), ("gpu_model", ""), ("volume_size_gb", "10")];
        let res = alice.post(server.url("/api/create_machine")).form(&form).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let machine = serde_json::from_str::<serde_json::Value>(&res.text().await.unwrap()).unwrap()["machine_id"].as_i64().unwrap();
        drive(&server, &dispatcher).await;
        assert_eq!(state(&server, machine).await, "running");
        let page = alice.get(server.url(&format!("/machines/{machine}"))).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(r#"data-testid="stop-machine""#), "the owner is offered Stop");

        // Another group's user: not found, for both (as the page's script
        // posts them: a browser without it is sent back with the refusal),
        // its page too, and nothing changes.
        for function in ["stop_machine", "start_machine"] {
            let form = [("machine_id", machine.to_string())];
            let res = carol.post(server.url(&format!("/api/{function}"))).form(&form).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::NOT_FOUND, "{function}");
        }
        let res = carol.get(server.url(&format!("/machines/{machine}"))).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tasks WHERE kind = 'reclaim'").await, 0);

        let (status, page) = post_form(&server, &alice, "stop_machine", machine).await;
        assert_eq!(status, StatusCode::FOUND);
        assert!(page.contains("Stop requested"), "the page says the stop was asked for");
        drive(&server, &dispatcher).await;
        let stop: (String, String) = sqlx::query_as("SELECT state, message FROM tasks WHERE kind = 'reclaim'").fetch_one(&server.pool).await.unwrap();
        assert_eq!(stop.0, "succeeded", "{}", stop.1);
        assert_eq!(state(&server, machine).await, "reclaimed");
        assert_eq!(count(&server.pool, "SELECT gpus_in_use FROM groups WHERE name = 'default'").await, 0, "GPUs back");
        let page = alice.get(server.url(&format!("/machines/{machine}"))).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(">shut down</span>"), "the state reads shut down");
        assert!(page.contains(r#"data-testid="start-machine""#) && page.contains(r#"data-testid="machine-shut-down""#));
        assert!(!page.contains(r#"data-testid="reclaim-restore""#), "no idle-reclaim Restore for a stopped machine");
        let list = alice.get(server.url("/machines")).send().await.unwrap().text().await.unwrap();
        assert!(list.contains(">shut down</span>") && list.contains("Start brings it back"), "the list shows state and message");

        let (status, page) = post_form(&server, &alice, "start_machine", machine).await;
        assert_eq!(status, StatusCode::FOUND);
        assert!(page.contains("Start requested"));
        assert_eq!(count(&server.pool, "SELECT gpus_in_use FROM groups WHERE name = 'default'").await, 2, "admitted again");
        drive(&server, &dispatcher).await;
        assert_eq!(state(&server, machine).await, "running");
        let page = alice.get(server.url(&format!("/machines/{machine}"))).send().await.unwrap().text().await.unwrap();
        assert!(page.contains(r#"data-testid="stop-machine""#) && !page.contains(">shut down</span>"));
        let audited = count(&server.pool, "SELECT COUNT(*) FROM audit_log WHERE action IN ('machine.stop', 'machine.start')").await;
        assert_eq!(audited, 2);
    }
}
