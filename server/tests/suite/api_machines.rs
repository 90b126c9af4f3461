//! The machines API over real HTTP answers as the machine pages do, through
//! the same functions: a machine created with a token is on the machines
//! page and in the API's list, runs (a simulated node, driven by a
//! dispatcher of the test's own), stops and starts with 202 and a task to
//! follow, and is deleted; another group's token gets 404 and changes
//! nothing; a create over the quota is 409 `refused` with the numbers; bad
//! input is 400 with its code and writes nothing.

use crate::common;

use common::{count, login, TestServer};
use gantry_core::Role;
use gantry_platform::{
    accounts,
    cluster::{self, NodeRegistration},
    dispatch::{self, Dispatcher},
    fleet::Fleet,
    gpus::{self, SimulatedGpus},
    images, policy, tokens,
};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::Arc;

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

async fn user(server: &TestServer, name: &str, group: &str) -> accounts::User {
    let new = accounts::NewUser { username: name, password: "a-good-password", role: Role::User, group: Some(group) };
    accounts::create_user(&server.pool, None, new).await.unwrap()
}

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

/// Method, path, token, optional JSON body: the status and the JSON answer.
async fn call(server: &TestServer, method: &str, path: &str, token: &str, body: Option<Value>) -> (StatusCode, Value) {
    let http = reqwest::Client::new();
    let mut req = http.request(method.parse().unwrap(), server.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// A refusal in the API's shape with this code.
fn refused(answer: &(StatusCode, Value), status: StatusCode, code: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["code"], code, "{}", answer.1);
    assert!(answer.1["error"].as_str().is_some_and(|e| !e.is_empty()), "{}", answer.1);
}

async fn task_state(server: &TestServer, token: &str, task: i64) -> String {
    let (status, body) = call(server, "GET", &format!("/api/v1/tasks/{task}"), token, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["state"].as_str().unwrap().to_string()
}

gantry_testkit::timed_test! {
    async fn machines_through_the_api_answer_as_the_pages_do() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        cluster(&server).await;
        let dispatcher = Dispatcher::new(server.pool.clone(), Fleet::new(), Arc::new(tokio::sync::Notify::new()), 4);
        accounts::create_group(&server.pool, None, "other", 4).await.unwrap();
        let alice = user(&server, "alice", "default").await;
        let carol = user(&server, "carol", "other").await;
        let (_, a) = tokens::create(&server.pool, &alice, "laptop").await.unwrap();
        let (_, c) = tokens::create(&server.pool, &carol, "ci").await.unwrap();

        // Bad input: 400 with its code, nothing written.
        let http = reqwest::Client::new();
        let res = http.post(server.url("/api/v1/machines")).bearer_auth(&a).header("content-type", "application/json").body("{not json").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert_eq!(res.json::<Value>().await.unwrap()["code"], "bad_request");
        let huge = format!("{{\"name\": \"{}\", \"gpus\": 1}}", "x".repeat(3 << 20));
        let res = http.post(server.url("/api/v1/machines")).bearer_auth(&a).header("content-type", "application/json").body(huge).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(res.json::<Value>().await.unwrap()["code"], "payload_too_large");
        for bad in [json!({"name": "box-1", "gpus": 0}), json!({"name": "Bad Name!", "gpus": 1}), json!({"name": "box-1", "gpus": 1, "colour": "red"}), json!({"name": "box-1", "gpus": 1, "cpus": 0.0001})] {
            refused(&call(&server, "POST", "/api/v1/machines", &a, Some(bad.clone())).await, StatusCode::BAD_REQUEST, "bad_request");
        }
        refused(&call(&server, "GET", "/api/v1/machines/abc", &a, None).await, StatusCode::BAD_REQUEST, "bad_request");
        refused(&call(&server, "POST", "/api/v1/machines/-x/stop", &a, None).await, StatusCode::BAD_REQUEST, "bad_request");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM machines").await, 0, "nothing written");

        // Created with a token: 202 and its task; in the list, on the page.
        let (status, created) = call(&server, "POST", "/api/v1/machines", &a, Some(json!({"name": "box-1", "gpus": 2}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{created}");
        let (machine, create_task) = (created["machine_id"].as_i64().unwrap(), created["task_id"].as_i64().unwrap());
        assert_eq!((created["node"].as_str(), created["gpu_indexes"].as_array().map(Vec::len)), (Some("node-a"), Some(2)));
        drive(&server, &dispatcher).await;
        assert_eq!(task_state(&server, &a, create_task).await, "succeeded");
        let (_, list) = call(&server, "GET", "/api/v1/machines", &a, None).await;
        let listed = &list["machines"][0];
        assert_eq!((listed["id"].as_i64(), listed["name"].as_str(), listed["state"].as_str()), (Some(machine), Some("box-1"), Some("running")), "{list}");
        assert_eq!((listed["gpus"].as_i64(), listed["node"].as_str(), listed["group"].as_str(), listed["shut_down"].as_bool()), (Some(2), Some("node-a"), Some("default"), Some(false)));
        assert_eq!(listed["image"], "devbox");
        let browser = server.client();
        assert_eq!(login(&server, &browser, "alice", "a-good-password").await.status(), StatusCode::OK);
        let page = browser.get(server.url("/machines")).send().await.unwrap().text().await.unwrap();
        assert!(page.contains("box-1"), "the machines page lists what the API made");
        // The group's 2 GPUs are in use: another is refused with the numbers, as on the page.
        let over = call(&server, "POST", "/api/v1/machines", &a, Some(json!({"name": "box-2", "gpus": 1}))).await;
        refused(&over, StatusCode::CONFLICT, "refused");
        assert!(over.1["error"].as_str().unwrap().contains('2'), "the numbers: {over:?}");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM machines").await, 1, "nothing written");
        let (status, detail) = call(&server, "GET", &format!("/api/v1/machines/{machine}"), &a, None).await;
        assert_eq!((status, detail["may_operate"].as_bool()), (StatusCode::OK, Some(true)), "{detail}");
        assert_eq!(detail["tasks"][0]["id"].as_i64(), Some(create_task));

        // Another group: 404 for everything, nothing changes.
        let tasks = count(&server.pool, "SELECT COUNT(*) FROM tasks").await;
        refused(&call(&server, "GET", &format!("/api/v1/machines/{machine}"), &c, None).await, StatusCode::NOT_FOUND, "not_found");
        refused(&call(&server, "GET", &format!("/api/v1/tasks/{create_task}"), &c, None).await, StatusCode::NOT_FOUND, "not_found");
        for op in ["stop", "start", "restart", "reinstall"] {
            refused(&call(&server, "POST", &format!("/api/v1/machines/{machine}/{op}"), &c, None).await, StatusCode::NOT_FOUND, "not_found");
        }
        refused(&call(&server, "POST", &format!("/api/v1/machines/{machine}/snapshot"), &c, Some(json!({"name": "s"}))).await, StatusCode::NOT_FOUND, "not_found");
        refused(&call(&server, "DELETE", &format!("/api/v1/machines/{machine}"), &c, None).await, StatusCode::NOT_FOUND, "not_found");
        assert_eq!(call(&server, "GET", "/api/v1/machines", &c, None).await.1, json!({"machines": []}));
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tasks").await, tasks, "no task for another group");

        // Stop: 202, the GPUs back; start: admitted again; both followed by task.
        let (status, stop) = call(&server, "POST", &format!("/api/v1/machines/{machine}/stop"), &a, None).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{stop}");
        drive(&server, &dispatcher).await;
        assert_eq!(task_state(&server, &a, stop["task_id"].as_i64().unwrap()).await, "succeeded");
        let (_, detail) = call(&server, "GET", &format!("/api/v1/machines/{machine}"), &a, None).await;
        assert_eq!((detail["machine"]["state"].as_str(), detail["machine"]["shut_down"].as_bool()), (Some("reclaimed"), Some(true)));
        assert_eq!(call(&server, "GET", "/api/v1/quota", &a, None).await.1, json!({"group": "default", "gpu_quota": 2, "gpus_in_use": 0, "max_gpus_per_machine": 2}));
        let (status, start) = call(&server, "POST", &format!("/api/v1/machines/{machine}/start"), &a, None).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{start}");
        drive(&server, &dispatcher).await;
        assert_eq!(task_state(&server, &a, start["task_id"].as_i64().unwrap()).await, "succeeded");
        assert_eq!(call(&server, "GET", "/api/v1/quota", &a, None).await.1["gpus_in_use"], 2);
        let (status, restart) = call(&server, "POST", &format!("/api/v1/machines/{machine}/restart"), &a, None).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{restart}");
        drive(&server, &dispatcher).await;
        assert_eq!(task_state(&server, &a, restart["task_id"].as_i64().unwrap()).await, "succeeded");

        // Delete: 202; then gone from the list, the GPUs back.
        let (status, deleted) = call(&server, "DELETE", &format!("/api/v1/machines/{machine}"), &a, None).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{deleted}");
        drive(&server, &dispatcher).await;
        assert_eq!(task_state(&server, &a, deleted["task_id"].as_i64().unwrap()).await, "succeeded");
        assert_eq!(call(&server, "GET", "/api/v1/machines", &a, None).await.1, json!({"machines": []}));
        assert_eq!(count(&server.pool, "SELECT gpus_in_use FROM groups WHERE name = 'default'").await, 0);
        // Its page still reads it (deleted), as the machine page does.
        let (status, detail) = call(&server, "GET", &format!("/api/v1/machines/{machine}"), &a, None).await;
        assert_eq!((status, detail["machine"]["state"].as_str()), (StatusCode::OK, Some("deleted")), "{detail}");
    }
}
