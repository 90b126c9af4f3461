//! Dev machines over real HTTP: create through the admission worker, group
//! isolation, quota refusals, bad input, and the admin functions for nodes,
//! images and group policy. The test server has no GPUs of its own: each
//! test registers a simulated node.

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

const MODEL: &str = "SIM-A100";

/// A simulated node with `gpus` GPUs, the default image, and the default
/// group's quota set to `quota`.
async fn cluster_with(server: &TestServer, gpus: u32, quota: i64) -> i64 {
    let found = gpus::simulated("node-a", &SimulatedGpus { count: gpus, model: MODEL.into(), memory_mb: 1024 });
    let node_id = cluster::register_node(
        &server.pool,
        NodeRegistration {
            name: "node-a",
            region_code: "local",
            docker_endpoint: "simulated://node-a",
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
    policy::update_group_policy(&server.pool, None, default_group, quota, 8, &[]).await.unwrap();
    node_id
}

async fn user_in(server: &TestServer, name: &str, group: &str) {
    accounts::create_user(
        &server.pool,
        None,
        accounts::NewUser { username: name, password: "a-good-password", role: Role::User, group: Some(group) },
    )
    .await
    .unwrap();
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

async fn create(
    server: &TestServer,
    client: &reqwest::Client,
    name: &str,
    gpus: &str,
    volume: &str,
) -> (StatusCode, String) {
    post(
        server,
        client,
        "/api/create_machine",
        &[("name", name), ("image_id", ""), ("gpu_count", gpus), ("gpu_model", ""), ("volume_size_gb", volume)],
    )
    .await
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

gantry_testkit::timed_test! {
    async fn a_user_creates_a_machine_and_only_their_group_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        cluster_with(&server, 3, 4).await;
        accounts::create_group(&server.pool, None, "other", 4).await.unwrap();
        user_in(&server, "alice", "default").await;
        user_in(&server, "carol", "other").await;
        let alice = signed_in(&server, "alice", "a-good-password").await;
        let carol = signed_in(&server, "carol", "a-good-password").await;
        let admin = signed_in(&server, "admin", ADMIN_PASSWORD).await;

        let (status, body) = post(&server, &alice, "/api/create_options", &[]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let options = json(&body);
        assert_eq!(options["images"][0]["name"], "devbox");
        assert_eq!(options["gpu_models"], serde_json::json!([MODEL]));
        assert_eq!(options["max_gpus_per_machine"], 8);
        assert_eq!(options["quota"]["gpu_quota"], 4);

        let (status, body) = create(&server, &alice, "box-1", "2", "10").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let created = json(&body);
        assert_eq!(created["node"], "node-a");
        assert_eq!(created["model"], MODEL);
        assert_eq!(created["gpu_indexes"], serde_json::json!([0, 1]));
        let id = created["machine_id"].as_i64().unwrap();
        assert_eq!(count(&server.pool, "SELECT gpus_in_use FROM groups WHERE name = 'default'").await, 2, "quota deducted");
        let (status, body) = create(&server, &alice, "box-1", "1", "10").await;
        assert!(status == StatusCode::CONFLICT && body.contains("already have a machine named"), "{status} {body}");
        assert_eq!(count(&server.pool, "SELECT gpus_in_use FROM groups WHERE name = 'default'").await, 2);

        // Listed for the owner (and for the admin), with node and GPUs.
        let (status, body) = post(&server, &alice, "/api/my_machines", &[]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let list = json(&body);
        assert_eq!(list.as_array().unwrap().len(), 1);
        assert_eq!(list[0]["name"], "box-1");
        assert_eq!(list[0]["node"], "node-a");
        assert_eq!(list[0]["gpu_indexes"], serde_json::json!([0, 1]));
        assert_eq!(list[0]["simulated"], true);
        let (_, body) = post(&server, &admin, "/api/my_machines", &[]).await;
        assert_eq!(json(&body).as_array().unwrap().len(), 1, "admins see every group's machines");
        let (status, body) = post(&server, &alice, "/api/my_tasks", &[]).await;
        assert_eq!(status, StatusCode::OK);
        let tasks = json(&body);
        assert_eq!(tasks[0]["kind"], "create");
        assert_eq!(tasks[0]["machine_name"], "box-1");
        let (status, body) = post(&server, &alice, "/api/machine_detail", &[("id", &id.to_string())]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(json(&body)["tasks"].as_array().unwrap().len(), 1);

        // The pages render the same, complete, without JavaScript.
        let page = alice.get(server.url("/machines")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let html = page.text().await.unwrap();
        assert!(html.contains(r#"data-testid="machine-row" data-name="box-1""#), "row for box-1");
        assert!(html.contains("2 × SIM-A100 (GPU 0,1)"), "GPUs as count × model (indexes)");
        assert!(html.contains(">simulated<"), "simulated GPUs are labelled");
        assert!(html.contains(r#"data-testid="create-machine""#), "the create form is there");
        assert!(html.contains(r#"data-testid="quota-used">2<"#), "quota gauge shows the deduction");
        let page = alice.get(server.url(&format!("/machines/{id}"))).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        let html = page.text().await.unwrap();
        assert!(html.contains(r#"data-testid="task-row""#) && html.contains(r#"data-testid="delete-machine""#), "detail page");
        // Without JavaScript, the box ticked before Delete names what goes:
        // the machine and, unless kept, its data volume with its size.
        let volume: String = sqlx::query_scalar("SELECT volume_name FROM machines WHERE id = ?").bind(id).fetch_one(&server.pool).await.unwrap();
        assert!(!volume.is_empty());
        let form = html.split(r#"data-testid="delete-machine""#).nth(1).and_then(|rest| rest.split("</form>").next()).unwrap();
        assert!(form.contains("deletes machine box-1") && form.contains(&format!("{volume} · 10 GB")), "{form}");
        let page = alice.get(server.url("/tasks")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        assert!(page.text().await.unwrap().contains(r#"data-kind="create""#));

        // Another group neither sees nor touches it.
        let (status, body) = post(&server, &carol, "/api/my_machines", &[]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(json(&body), serde_json::json!([]));
        let (_, body) = post(&server, &carol, "/api/my_tasks", &[]).await;
        assert_eq!(json(&body), serde_json::json!([]));
        let (status, _) = post(&server, &carol, "/api/machine_detail", &[("id", &id.to_string())]).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let tasks_before = count(&server.pool, "SELECT COUNT(*) FROM tasks").await;
        for op in ["restart", "reinstall", "delete"] {
            let (status, body) =
                post(&server, &carol, "/api/machine_operation", &[("machine_id", &id.to_string()), ("operation", op)]).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{op}: {body}");
            assert!(body.contains("machine not found"), "{body}");
        }
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tasks").await, tasks_before);
        let page = carol.get(server.url(&format!("/machines/{id}"))).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::NOT_FOUND);
        assert!(!page.text().await.unwrap().contains("box-1"));

        // The owner's operations: refused while creating, accepted once running.
        let (status, body) =
            post(&server, &alice, "/api/machine_operation", &[("machine_id", &id.to_string()), ("operation", "explode")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("expected restart, reinstall or delete"), "{body}");
        sqlx::query("UPDATE tasks SET state = 'succeeded', progress = 100 WHERE machine_id = ?").bind(id).execute(&server.pool).await.unwrap();
        sqlx::query("UPDATE machines SET state = 'running' WHERE id = ?").bind(id).execute(&server.pool).await.unwrap();
        let (status, body) = post(
            &server,
            &alice,
            "/api/machine_operation",
            &[("machine_id", &id.to_string()), ("operation", "delete"), ("keep_volume", "on")],
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let task_id: i64 = body.trim().parse().unwrap();
        assert_eq!(count(&server.pool, &format!("SELECT keep_volume FROM tasks WHERE id = {task_id} AND kind = 'delete'")).await, 1);
        let (status, body) =
            post(&server, &alice, "/api/machine_operation", &[("machine_id", &id.to_string()), ("operation", "restart")]).await;
        assert_eq!(status, StatusCode::CONFLICT, "one operation at a time: {body}");
    }
}

gantry_testkit::timed_test! {
    async fn over_quota_is_refused_with_the_numbers_and_bad_input_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        cluster_with(&server, 2, 1).await;
        user_in(&server, "alice", "default").await;
        let alice = signed_in(&server, "alice", "a-good-password").await;

        let (status, body) = create(&server, &alice, "box-1", "1", "10").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = create(&server, &alice, "box-2", "1", "10").await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("group default holds 1 of 1 GPU; this machine asks for 1"), "{body}");
        assert_eq!(count(&server.pool, "SELECT gpus_in_use FROM groups WHERE name = 'default'").await, 1);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM machines").await, 1);
        assert_eq!(
            count(&server.pool, "SELECT COUNT(*) FROM tasks WHERE state = 'failed' AND machine_name = 'box-2'").await,
            1,
            "the refusal is in the task list with its reason"
        );

        let machines = count(&server.pool, "SELECT COUNT(*) FROM machines").await;
        let tasks = count(&server.pool, "SELECT COUNT(*) FROM tasks").await;
        let audit = count(&server.pool, "SELECT COUNT(*) FROM audit_log").await;
        let bad = [
            ("", "1", "10", "machine name is required"),
            ("Bad Name", "1", "10", "machine name may contain only"),
            ("box-3", "abc", "10", "GPU count must be a whole number"),
            ("box-3", "0", "10", "GPU count must be a whole number between 1 and 64"),
            ("box-3", "1", "0", "volume size (GB) must be a whole number between 1 and"),
            ("box-3", "1", "lots", "volume size (GB) must be a whole number"),
        ];
        for (name, gpus, volume, message) in bad {
            let (status, body) = create(&server, &alice, name, gpus, volume).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{name}/{gpus}/{volume}: {body}");
            assert!(body.contains(message), "{body} should say {message}");
        }
        let (status, body) = post(
            &server,
            &alice,
            "/api/create_machine",
            &[("name", "box-3"), ("image_id", "x"), ("gpu_count", "1"), ("gpu_model", ""), ("volume_size_gb", "10")],
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM machines").await, machines);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tasks").await, tasks);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log").await, audit);
        assert_eq!(count(&server.pool, "SELECT gpus_in_use FROM groups WHERE name = 'default'").await, 1);

        let anonymous = server.client();
        let (status, _) = create(&server, &anonymous, "box-4", "1", "10").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
}

gantry_testkit::timed_test! {
    async fn admin_functions_are_for_admins_and_edit_nodes_images_and_groups() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let node_id = cluster_with(&server, 2, 1).await.to_string();
        user_in(&server, "alice", "default").await;
        let alice = signed_in(&server, "alice", "a-good-password").await;
        let admin = signed_in(&server, "admin", ADMIN_PASSWORD).await;
        let group_id = count(&server.pool, "SELECT id FROM groups WHERE name = 'default'").await.to_string();

        let audit = count(&server.pool, "SELECT COUNT(*) FROM audit_log").await;
        let forbidden: [(&str, Vec<(&str, &str)>); 5] = [
            ("/api/admin/nodes", vec![]),
            ("/api/admin/images", vec![]),
            ("/api/admin/set_node_state", vec![("node_id", &node_id), ("state", "down")]),
            ("/api/admin/create_image", vec![("name", "evil"), ("reference", "evil/image:1"), ("description", "")]),
            (
                "/api/admin/update_group",
                vec![("group_id", &group_id), ("gpu_quota", "1000"), ("max_gpus_per_machine", "8"), ("allowed_models", "")],
            ),
        ];
        for (path, form) in &forbidden {
            let (status, _) = post(&server, &alice, path, form).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        }
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log").await, audit, "nothing changed");
        assert_eq!(count(&server.pool, "SELECT gpu_quota FROM groups WHERE name = 'default'").await, 1);

        // Nodes: listed with their GPUs; state set and audited; bad state 400.
        let (status, body) = post(&server, &admin, "/api/admin/nodes", &[]).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let nodes = json(&body);
        assert_eq!(nodes[0]["name"], "node-a");
        assert_eq!((nodes[0]["gpu_total"].as_i64(), nodes[0]["gpu_free"].as_i64()), (Some(2), Some(2)));
        assert_eq!(nodes[0]["gpu_models"], serde_json::json!([MODEL]));
        assert_eq!((nodes[0]["simulated"].as_bool(), nodes[0]["heartbeat_fresh"].as_bool()), (Some(true), Some(true)));
        assert_eq!(nodes[0]["unenforced_volumes"].as_i64(), Some(0), "no machine yet");
        let (status, body) = post(&server, &admin, "/api/admin/set_node_state", &[("node_id", &node_id), ("state", "sideways")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("unknown node state"), "{body}");
        let (status, _) = post(&server, &admin, "/api/admin/set_node_state", &[("node_id", &node_id), ("state", "draining")]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM nodes WHERE state = 'draining'").await, 1);
        let (status, body) = create(&server, &alice, "box-1", "1", "10").await;
        assert_eq!(status, StatusCode::CONFLICT, "a draining node takes no new machines: {body}");
        assert!(body.contains("no ready node has 1 free GPU"), "{body}");
        let (status, _) = post(&server, &admin, "/api/admin/set_node_state", &[("node_id", &node_id), ("state", "ready")]).await;
        assert_eq!(status, StatusCode::OK);

        // Images: created, listed; a bad reference is 400.
        let (status, body) = post(
            &server,
            &admin,
            "/api/admin/create_image",
            &[("name", "cuda"), ("reference", "nvidia/cuda:12.4-base"), ("description", "CUDA base"), ("make_default", "on")],
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(json(&body)["is_default"], true);
        let (status, body) =
            post(&server, &admin, "/api/admin/create_image", &[("name", "bad"), ("reference", "rm -rf /"), ("description", "")]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let (_, body) = post(&server, &admin, "/api/admin/images", &[]).await;
        let names: Vec<String> = json(&body).as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(names, ["cuda", "devbox"], "default first");

        // Group policy: alice takes the one GPU, then the admin lowers the quota
        // below that: nothing is taken away, new requests are refused.
        let (status, body) = create(&server, &alice, "box-1", "1", "10").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let update = |quota: &'static str, max: &'static str, models: &'static str| {
            let group_id = group_id.clone();
            let admin = admin.clone();
            let url = server.url("/api/admin/update_group");
            async move {
                let res = admin
                    .post(url)
                    .form(&[("group_id", group_id.as_str()), ("gpu_quota", quota), ("max_gpus_per_machine", max), ("allowed_models", models)])
                    .send()
                    .await
                    .unwrap();
                (res.status(), res.text().await.unwrap())
            }
        };
        let (status, body) = update("0", "4", "SIM-A100, H100 ,").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let group = json(&body);
        assert_eq!((group["gpu_quota"].as_i64(), group["gpus_in_use"].as_i64()), (Some(0), Some(1)));
        assert_eq!(group["allowed_models"], serde_json::json!(["H100", MODEL]));
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM machine_gpus").await, 1, "nothing is taken away");
        let detail: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'group.update' ORDER BY id DESC LIMIT 1")
            .fetch_one(&server.pool)
            .await
            .unwrap();
        assert!(detail.contains("GPU quota 1 → 0") && detail.contains("max per machine 8 → 4") && detail.contains("models any → H100, SIM-A100"), "{detail}");
        let (status, body) = create(&server, &alice, "box-2", "1", "10").await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(body.contains("group default holds 1 of 0 GPUs; this machine asks for 1"), "{body}");

        let audit = count(&server.pool, "SELECT COUNT(*) FROM audit_log").await;
        let bad = [
            ("-1", "4", "", "GPU quota must be a whole number between 0 and 100000"),
            ("many", "4", "", "GPU quota must be a whole number"),
            ("4", "0", "", "GPUs per machine must be a whole number between 1 and 64"),
            ("4", "65", "", "GPUs per machine must be a whole number between 1 and 64"),
        ];
        for (quota, max, models, message) in bad {
            let (status, body) = update(quota, max, models).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{quota}/{max}: {body}");
            assert!(body.contains(message), "{body} should say {message}");
        }
        let long_model: &'static str = Box::leak("m".repeat(65).into_boxed_str());
        let (status, body) = update("4", "4", long_model).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log").await, audit, "bad input changes nothing");
        assert_eq!(count(&server.pool, "SELECT gpu_quota FROM groups WHERE name = 'default'").await, 0);
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM group_gpu_models").await, 2);

        // Per-machine CPU and memory limits: set together, refused together.
        let limits = |cpus: &'static str, mem: &'static str| {
            let (admin, url, group_id) = (admin.clone(), server.url("/api/admin/update_group"), group_id.clone());
            async move {
                let form = [("group_id", group_id.as_str()), ("gpu_quota", "0"), ("max_gpus_per_machine", "4"), ("allowed_models", "H100, SIM-A100"),
                            ("max_cpus_per_machine", cpus), ("max_memory_gb_per_machine", mem)];
                let res = admin.post(url).form(&form).send().await.unwrap();
                (res.status(), res.text().await.unwrap())
            }
        };
        let (status, body) = limits("8", "32").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!((json(&body)["max_cpus_per_machine"].as_i64(), json(&body)["max_memory_gb_per_machine"].as_i64()), (Some(8), Some(32)));
        let audit = count(&server.pool, "SELECT COUNT(*) FROM audit_log").await;
        for (cpus, mem) in [("0", "32"), ("8", "5000"), ("x", "32")] {
            let (status, body) = limits(cpus, mem).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{cpus}/{mem}: {body}");
        }
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM audit_log").await, audit, "refused limits change nothing");
        assert_eq!(count(&server.pool, "SELECT max_cpus_per_machine FROM groups WHERE name = 'default'").await, 8);

        // The admin pages render. Alice's machine is running on a plain
        // volume (no loop device): the node says so.
        sqlx::query("UPDATE machines SET state = 'running', volume_enforced = 0 WHERE name = 'box-1'").execute(&server.pool).await.unwrap();
        for (path, needle) in [
            ("/admin/nodes", r#"data-testid="node-row" data-name="node-a""#),
            ("/admin/nodes", r#"data-testid="node-unenforced""#),
            ("/admin/nodes", "1 volume without a size limit"),
            ("/admin/images", r#"data-testid="image-row" data-name="cuda""#),
            ("/admin/groups", r#"data-testid="group-policy""#),
        ] {
            let page = admin.get(server.url(path)).send().await.unwrap();
            assert_eq!(page.status(), StatusCode::OK, "{path}");
            let html = page.text().await.unwrap();
            assert!(html.contains(needle), "{path} should contain {needle}: {}", &html[html.find("<main").unwrap_or(0)..].chars().take(3000).collect::<String>());
        }
        let page = alice.get(server.url("/admin/nodes")).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::FORBIDDEN);
    }
}

gantry_testkit::timed_test! {
    async fn a_group_member_sees_a_colleagues_machine_without_its_owner_only_actions() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        cluster_with(&server, 2, 4).await;
        user_in(&server, "alice", "default").await;
        user_in(&server, "bob", "default").await;
        let alice = signed_in(&server, "alice", "a-good-password").await;
        let bob = signed_in(&server, "bob", "a-good-password").await;
        let admin = signed_in(&server, "admin", ADMIN_PASSWORD).await;
        let (status, body) = create(&server, &alice, "box-1", "1", "10").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let id = json(&body)["machine_id"].as_i64().unwrap();
        sqlx::query("UPDATE tasks SET state = 'succeeded', progress = 100 WHERE machine_id = ?").bind(id).execute(&server.pool).await.unwrap();
        sqlx::query("UPDATE machines SET state = 'running' WHERE id = ?").bind(id).execute(&server.pool).await.unwrap();

        // Owner-only forms: what the server would refuse Bob, his page does not offer.
        let owner_only = [
            r#"data-testid="restart-machine""#,
            r#"data-testid="reinstall-machine""#,
            r#"data-testid="delete-machine""#,
            r#"data-testid="keep-volume""#,
            r#"data-testid="snapshot-take""#,
            r#"data-testid="rebalance-opt-out""#,
        ];
        let page = |client: &reqwest::Client| {
            let req = client.get(server.url(&format!("/machines/{id}")));
            async move {
                let res = req.send().await.unwrap();
                assert_eq!(res.status(), StatusCode::OK);
                res.text().await.unwrap()
            }
        };
        let html = page(&bob).await;
        assert!(html.contains(r#"data-testid="machine-facts""#) && html.contains("box-1"), "Bob sees his colleague's machine");
        for needle in owner_only {
            assert!(!html.contains(needle), "a non-owner's page offers {needle}");
        }
        assert!(!html.contains(">Delete machine<") && !html.contains(">Restart<"), "no delete or restart button for a non-owner");
        assert!(html.contains(r#"data-testid="owner-only""#) && html.contains("Only its owner (alice) or an admin"), "says who can act on it");
        for (who, client) in [("alice", &alice), ("admin", &admin)] {
            let html = page(client).await;
            for needle in owner_only {
                assert!(html.contains(needle), "{who}'s page should offer {needle}");
            }
            assert!(!html.contains(r#"data-testid="owner-only""#), "{who} is not told to ask someone else");
        }

        // The page's data carries the flag, decided on the server.
        for (who, client, expected) in [("alice", &alice, true), ("bob", &bob, false), ("admin", &admin, true)] {
            let (status, body) = post(&server, client, "/api/machine_detail", &[("id", &id.to_string())]).await;
            assert_eq!(status, StatusCode::OK, "{who}: {body}");
            assert_eq!(json(&body)["can_operate"], expected, "{who}: {body}");
        }

        // A compute task's machine: its owner ends it by cancelling the
        // task (the server refuses the machine's own actions and snapshots
        // to non-admins), so the page offers them to an admin only.
        sqlx::query("UPDATE machines SET workload = 'job' WHERE id = ?").bind(id).execute(&server.pool).await.unwrap();
        let html = page(&alice).await;
        // (The rebalancing opt-out is a setting, not an action: kept.)
        for needle in owner_only.iter().filter(|n| !n.contains("rebalance-opt-out")) {
            assert!(!html.contains(needle), "the owner's page of a job machine offers {needle}");
        }
        assert!(html.contains(r#"data-testid="job-machine""#) && html.contains("cancel the task"), "says how it ends");
        // A colleague is told whose task it is, not to cancel it.
        let html = page(&bob).await;
        assert!(html.contains(r#"data-testid="job-machine""#) && html.contains("compute task and ends with it."), "says what it is");
        assert!(!html.contains("cancel the task"), "Bob cannot cancel Alice's task");
        let html = page(&admin).await;
        assert!(html.contains(r#"data-testid="delete-machine""#) && !html.contains(r#"data-testid="job-machine""#), "an admin may still delete it");
        // Nobody restarts or reinstalls it (its command runs at most once;
        // the server refuses): not offered to an admin either, who is told why.
        assert!(!html.contains(r#"data-testid="restart-machine""#) && !html.contains(r#"data-testid="reinstall-machine""#), "an admin is offered a relaunch");
        assert!(html.contains(r#"data-testid="job-machine-admin""#) && html.contains("runs at most once"), "the admin is told why");
        for (who, client, expected) in [("alice", &alice, false), ("admin", &admin, true)] {
            let (_, body) = post(&server, client, "/api/machine_detail", &[("id", &id.to_string())]).await;
            assert_eq!((json(&body)["can_operate"].clone(), json(&body)["job"].clone()), (expected.into(), true.into()), "{who}: {body}");
        }
        sqlx::query("UPDATE machines SET workload = 'dev' WHERE id = ?").bind(id).execute(&server.pool).await.unwrap();

        // The server agrees: Bob's restart is refused and nothing is queued.
        let tasks = count(&server.pool, "SELECT COUNT(*) FROM tasks").await;
        let (status, body) = post(&server, &bob, "/api/machine_operation", &[("machine_id", &id.to_string()), ("operation", "restart")]).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("only machine box-1's owner, or an admin"), "{body}");
        assert_eq!(count(&server.pool, "SELECT COUNT(*) FROM tasks").await, tasks);
    }
}
