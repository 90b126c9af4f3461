//! Issue 33, item 8 over HTTP: the admin sets a group's disk limits (root
//! filesystem per machine, snapshot storage) on the Groups page's form,
//! bad values are refused with 400 and change nothing; the Nodes page
//! shows each node's free disk, "below the floor", or "unknown".

use crate::common;

use common::{count, login, TestServer, ADMIN_PASSWORD};
use gantry_core::{
    disk::{GB, MB},
    Role,
};
use gantry_platform::{
    accounts,
    executor::{Executor, SimulatedExecutor},
    fleet::Fleet,
};
use reqwest::StatusCode;

gantry_testkit::timed_test! {
    async fn the_admin_sets_a_groups_disk_limits_and_bad_values_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let pool = &server.pool;
        let group = accounts::create_group(pool, None, "ml", 4).await.unwrap().id.to_string();
        let save = |client: reqwest::Client, root: &'static str, snaps: &'static str| {
            let form = vec![
                ("group_id", group.clone()),
                ("gpu_quota", "4".into()),
                ("max_gpus_per_machine", "2".into()),
                ("allowed_models", String::new()),
                ("root_disk_gb", root.into()),
                ("snapshot_disk_gb", snaps.into()),
            ];
            let url = server.url("/api/admin/update_group");
            async move {
                let res = client.post(url).form(&form).send().await.unwrap();
                (res.status(), res.text().await.unwrap())
            }
        };
        let stored = format!("SELECT root_disk_mb * 10000000 + snapshot_disk_mb FROM groups WHERE id = {group}");
        let defaults = 50_000 * 10_000_000 + 500_000;
        assert_eq!(count(pool, &stored).await, defaults);

        server.add_user("dave", "daves-password", Role::User).await;
        let dave = server.client();
        login(&server, &dave, "dave", "daves-password").await;
        assert_eq!(save(dave, "0.02", "1").await.0, StatusCode::FORBIDDEN);

        let admin = server.client();
        login(&server, &admin, "admin", ADMIN_PASSWORD).await;
        let audits = count(pool, "SELECT COUNT(*) FROM audit_log").await;
        for (root, snaps, says) in [
            ("-1", "1", "root filesystem per machine (GB)"),
            ("1e9", "1", "root filesystem per machine (GB)"),
            ("0.0001", "1", "root filesystem per machine (GB)"),
            ("99999999999", "1", "root filesystem per machine (GB)"),
            ("1", "lots", "snapshot storage (GB)"),
            ("1", "1000001", "snapshot storage (GB)"),
        ] {
            let (status, body) = save(admin.clone(), root, snaps).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{root} / {snaps}: {body}");
            assert!(body.contains(says), "{body} should say {says}");
        }
        assert_eq!(count(pool, &stored).await, defaults, "nothing of a refused edit is kept");
        assert_eq!(count(pool, "SELECT COUNT(*) FROM audit_log").await, audits);

        let (status, body) = save(admin.clone(), "0.02", "1.5").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(count(pool, &stored).await, 20 * 10_000_000 + 1_500);
        let audit: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'group.update' ORDER BY id DESC LIMIT 1")
            .fetch_one(pool)
            .await
            .unwrap();
        assert!(audit.contains("root filesystem per machine 50 GB → 20 MB") && audit.contains("snapshot storage 500 GB → 1.500 GB"), "{audit}");
        let html = admin.get(server.url("/admin/groups")).send().await.unwrap().text().await.unwrap();
        assert!(html.contains("20 MB per machine outside /data · 1.500 GB of snapshots"), "the table shows the limits");
        assert!(html.contains(r#"name="root_disk_gb" min="0" max="1000000" step="0.001" value="0.02""#), "the form shows them in GB");
    }
}

gantry_testkit::timed_test! {
    async fn the_nodes_page_shows_free_disk_below_the_floor_and_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let pool = &server.pool;
        let admin = server.client();
        login(&server, &admin, "admin", ADMIN_PASSWORD).await;
        for name in ["full-1", "roomy-1", "remote-1"] {
            let endpoint = format!("simulated://{name}");
            let form = [("name", name), ("region_code", "local"), ("endpoint", &endpoint), ("gpu_count", "1"), ("gpu_model", ""), ("arch", "amd64")];
            let res = admin.post(server.url("/api/admin/add_node")).form(&form).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
        }
        // What each node's engine reports; remote-1's: nothing (unknown).
        let fleet = Fleet::new();
        for (name, space) in [("full-1", (3_200 * MB, 100 * GB)), ("roomy-1", (250 * GB, 500 * GB))] {
            let sim = SimulatedExecutor::new();
            sim.set_disk_space(Some(space));
            fleet.insert(count(pool, &format!("SELECT id FROM nodes WHERE name = '{name}'")).await, Executor::from(sim));
        }
        gantry_platform::nodes::monitor_once(pool, &fleet).await.unwrap();

        let html = admin.get(server.url("/admin/nodes")).send().await.unwrap().text().await.unwrap();
        let row = |name: &str| {
            let start = html.find(&format!(r#"data-name="{name}""#)).unwrap_or_else(|| panic!("row {name}"));
            html[start..].split("</tr>").next().unwrap().to_string()
        };
        let full = row("full-1");
        assert!(full.contains("3.20 GB of 100.00 GB"), "{full}");
        assert!(full.contains("below the floor") && full.contains("node full-1 has 3.20 GB free, below the 10 GB floor for new machines"), "{full}");
        let roomy = row("roomy-1");
        assert!(roomy.contains("250.00 GB of 500.00 GB") && !roomy.contains("below the floor"), "{roomy}");
        assert!(row("remote-1").contains(">unknown<"), "{}", row("remote-1"));
    }
}

gantry_testkit::timed_test! {
    async fn the_machine_page_shows_its_filesystem_outside_data_against_the_limit() {
        use gantry_platform::{cluster, gpus, images, policy};
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let pool = &server.pool;
        let found = gpus::simulated("node-a", &gpus::SimulatedGpus { count: 2, model: "SIM-A100".into(), memory_mb: 1024 });
        let registration = cluster::NodeRegistration {
            name: "node-a",
            region_code: "local",
            docker_endpoint: "simulated://node-a",
            volume_dir: "",
            executor: "simulated",
            cpu_count: 4,
            memory_mb: 0,
            gpus: &found,
        };
        cluster::register_node(pool, registration).await.unwrap();
        images::create_image(pool, None, "devbox", "gantry/devbox:latest", "demo", true).await.unwrap();
        let default_group = accounts::ensure_default_group(pool).await.unwrap();
        policy::update_group_policy(pool, None, default_group, 2, 2, &[]).await.unwrap();
        accounts::create_group(pool, None, "other", 1).await.unwrap();
        for (name, group) in [("alice", "default"), ("carol", "other")] {
            let new = accounts::NewUser { username: name, password: "a-good-password", role: Role::User, group: Some(group) };
            accounts::create_user(pool, None, new).await.unwrap();
        }
        let alice = server.client();
        login(&server, &alice, "alice", "a-good-password").await;
        let form = [("name", "filler"), ("image_id", ""), ("gpu_count", "1"), ("gpu_model", ""), ("volume_size_gb", "10")];
        let res = alice.post(server.url("/api/create_machine")).form(&form).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let id = count(pool, "SELECT id FROM machines WHERE name = 'filler'").await;

        let page = |client: &reqwest::Client| client.get(server.url(&format!("/machines/{id}"))).send();
        let html = page(&alice).await.unwrap().text().await.unwrap();
        assert!(html.contains("not measured yet; its limit is 50 GB"), "the default limit before a reading");

        // As the disk watcher leaves it after warning (platform tests run the watcher itself).
        sqlx::query("UPDATE groups SET root_disk_mb = 20 WHERE id = ?").bind(default_group).execute(pool).await.unwrap();
        sqlx::query("UPDATE machines SET root_disk_bytes = 19000000, root_disk_at = 1800000000, root_disk_warned = 1 WHERE id = ?")
            .bind(id)
            .execute(pool)
            .await
            .unwrap();
        let html = page(&alice).await.unwrap().text().await.unwrap();
        let card = &html[html.find(r#"data-testid="machine-disk""#).expect("the card")..];
        let card = card.split("</section>").next().unwrap();
        assert!(card.contains("19.0 MB of its 20 MB limit (95 %)") && card.contains("nearly full"), "{card}");

        // Another group's machine: not found, as everywhere.
        let carol = server.client();
        login(&server, &carol, "carol", "a-good-password").await;
        let res = carol.post(server.url("/api/machine_disk")).form(&[("machine_id", id.to_string())]).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
    }
}
