//! Schedules and "start when GPUs are free" over HTTP, as the pages' forms
//! post them without JavaScript: a start with no room and the box ticked
//! waits with its place shown on the machine page, and is cancelled; the
//! account page's time zone is used by the schedule card; a bad time or
//! zone is refused on the page and changes nothing; another group's user
//! is answered 404; a start reads "start" in the task history; an admin
//! sets a group's longest run on Admin → Groups. Tasks run on a simulated
//! node through a dispatcher of the test's own.

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

const HTML: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

async fn cluster(server: &TestServer) -> i64 {
    let found = gpus::simulated("node-s", &SimulatedGpus { count: 2, model: "SIM-A100".into(), memory_mb: 1024 });
    let registration = NodeRegistration {
        name: "node-s",
        region_code: "local",
        docker_endpoint: "simulated://node-s",
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
    default_group
}

async fn signed_in(server: &TestServer, name: &str, group: &str, role: Role) -> reqwest::Client {
    let user = accounts::NewUser { username: name, password: "a-good-password", role, group: Some(group) };
    accounts::create_user(&server.pool, None, user).await.unwrap();
    let client = server.client();
    assert_eq!(login(server, &client, name, "a-good-password").await.status(), StatusCode::OK);
    client
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

/// Posts `fields` to `function` from `page` as a browser without
/// JavaScript; the status, and the page it is sent back to.
async fn post(
    server: &TestServer,
    client: &reqwest::Client,
    function: &str,
    page: &str,
    fields: &[(&str, String)],
) -> (StatusCode, String) {
    let page = server.url(page);
    let res = client
        .post(server.url(&format!("/api/{function}")))
        .header(header::ACCEPT, HTML)
        .header(header::REFERER, &page)
        .form(fields)
        .send()
        .await
        .unwrap();
    let status = res.status();
    if status != StatusCode::FOUND {
        return (status, res.text().await.unwrap());
    }
    (status, client.get(&page).send().await.unwrap().text().await.unwrap())
}

async fn create(server: &TestServer, client: &reqwest::Client, name: &str) -> i64 {
    let form = [("name", name), ("image_id", ""), ("gpu_count", "2"), ("gpu_model", ""), ("volume_size_gb", "10")];
    let res = client.post(server.url("/api/create_machine")).form(&form).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    serde_json::from_str::<serde_json::Value>(&res.text().await.unwrap()).unwrap()["machine_id"].as_i64().unwrap()
}

fn id(m: i64) -> (&'static str, String) {
    ("machine_id", m.to_string())
}

gantry_testkit::timed_test! {
    async fn a_start_waits_for_gpus_and_a_schedule_is_set_from_the_pages() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let group = cluster(&server).await;
        let dispatcher = Dispatcher::new(server.pool.clone(), Fleet::new(), Arc::new(tokio::sync::Notify::new()), 4);
        accounts::create_group(&server.pool, None, "other", 4).await.unwrap();
        let alice = signed_in(&server, "alice", "default", Role::User).await;
        let carol = signed_in(&server, "carol", "other", Role::User).await;
        let root = signed_in(&server, "root", "default", Role::Admin).await;
        let first = create(&server, &alice, "box-1").await;
        drive(&server, &dispatcher).await;
        let page = format!("/machines/{first}");
        post(&server, &alice, "stop_machine", &page, &[id(first)]).await;
        drive(&server, &dispatcher).await;
        let hog = create(&server, &alice, "box-2").await;
        drive(&server, &dispatcher).await;

        // No room: with the box ticked, it waits, its place on its page.
        let shown = alice.get(server.url(&page)).send().await.unwrap().text().await.unwrap();
        assert!(shown.contains(r#"data-testid="start-queue""#), "the page offers to wait for GPUs");
        let (status, shown) =
            post(&server, &alice, "start_machine_or_queue", &page, &[id(first), ("queue", "on".into())]).await;
        assert_eq!(status, StatusCode::FOUND);
        assert!(shown.contains("Waiting for GPUs: 1st in line in group default"), "the answer says so");
        assert!(shown.contains(r#"data-testid="start-queue-place""#), "the schedule card shows its place");
        let form = [("machine_id", first.to_string())];
        let res = carol.post(server.url("/api/cancel_queued_start")).form(&form).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "another group's machine");
        let (_, shown) = post(&server, &alice, "cancel_queued_start", &page, &[id(first)]).await;
        assert!(shown.contains("Waiting start cancelled.") && !shown.contains(r#"data-testid="start-queue-place""#));
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM start_queue").await, 0);

        // The account page's time zone: a bad one changes nothing.
        let (_, shown) = post(&server, &alice, "set_my_time_zone", "/account/password", &[("time_zone", "Mars/Olympus".into())]).await;
        assert!(shown.contains("is not a time zone"), "refused on the page");
        let (_, shown) = post(&server, &alice, "set_my_time_zone", "/account/password", &[("time_zone", "Europe/Paris".into())]).await;
        assert!(shown.contains(r#"value="Europe/Paris""#), "the account page shows the zone");

        let schedule = |stop: &str, hours: &str| {
            vec![id(first), ("stop_at", stop.to_string()), ("start_at", String::new()), ("stop_after_hours", hours.to_string())]
        };
        let (_, shown) = post(&server, &alice, "set_machine_schedule", &page, &schedule("25:00", "")).await;
        assert!(shown.contains("is not a time of day"), "refused on the page");
        let (_, shown) = post(&server, &alice, "set_machine_schedule", &page, &schedule("", "-2")).await;
        assert!(shown.contains("must not be negative"), "refused on the page");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM machine_schedules").await, 0, "nothing changed");
        let res = carol.post(server.url("/api/set_machine_schedule")).form(&schedule("19:00", "")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        let (_, shown) = post(&server, &alice, "set_machine_schedule", &page, &schedule("19:00", "8")).await;
        assert!(shown.contains("stops daily at 19:00, stops after 8 h running (Europe/Paris)"), "the card sums it up");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log WHERE action = 'machine.schedule'").await, 1);

        // Room again: a start without the box, shown as a start.
        post(&server, &alice, "stop_machine", &format!("/machines/{hog}"), &[id(hog)]).await;
        drive(&server, &dispatcher).await;
        let (_, shown) = post(&server, &alice, "start_machine_or_queue", &page, &[id(first)]).await;
        assert!(shown.contains("Starting (task #"), "the answer says it starts");
        drive(&server, &dispatcher).await;
        let shown = alice.get(server.url(&page)).send().await.unwrap().text().await.unwrap();
        assert!(shown.contains("<code>start</code>"), "the task history reads start, not restore");
        assert!(shown.contains(r#"data-testid="schedule-next""#) && shown.contains("stop after 8 h running"), "the next action");

        // Admin → Groups: the longest run; a user may not set it.
        let fields = [("group_id", group.to_string()), ("max_run_hours", "12".to_string())];
        let res = alice.post(server.url("/api/set_group_max_run")).form(&fields).send().await.unwrap();
        assert_ne!(res.status(), StatusCode::OK);
        let (_, shown) = post(&server, &root, "set_group_max_run", "/admin/groups", &fields).await;
        assert!(shown.contains("Longest run saved.") && shown.contains(r#"value="12""#), "saved and shown");
        let shown = alice.get(server.url(&page)).send().await.unwrap().text().await.unwrap();
        assert!(shown.contains("lets a machine run at most 12 h without a stop"), "the machine page says so");
    }
}
