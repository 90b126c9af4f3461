//! Adding worker nodes: the connection is tested before anything is saved,
//! bad input is refused with a clear message, and the monitor keeps the
//! heartbeat of every engine that answers.

use gantry_testkit::engine;

use engine::env;
use gantry_core::alloc::NodeState;
use gantry_platform::{
    cluster,
    nodes::{self, AddNode},
    transitions, PlatformError,
};

fn node(name: &str, endpoint: &str) -> AddNode {
    AddNode {
        name: name.into(),
        region_code: "local".into(),
        endpoint: endpoint.into(),
        gpu_count: 2,
        gpu_model: "L40S".into(),
        arch: String::new(),
    }
}

gantry_testkit::timed_test! {
    async fn a_node_is_added_only_when_its_engine_answers() {
        let env = env("simulated", 1, 1).await;
        let fleet = &env.dispatcher.fleet;
        let admin = env.user("root", "ml-team").await.id;
        let before = env.scalar("SELECT COUNT(*) FROM nodes").await;
        let dead = nodes::add_node(&env.pool, fleet, admin, &node("dead", "unix:///tmp/gantry-no-engine.sock")).await.unwrap_err();
        assert!(matches!(&dead, PlatformError::BadRequest(m) if m.starts_with("connection test failed, nothing saved")), "{dead}");
        for (bad, why) in [
            (node("xy", "ftp://host"), "endpoint must be"),
            (node("Bad Name", "unix:///var/run/docker.sock"), "node name"),
            (AddNode { gpu_model: String::new(), ..node("nomodel", "unix:///var/run/docker.sock") }, "GPU model"),
        ] {
            let e = nodes::add_node(&env.pool, fleet, admin, &bad).await.unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, before, "nothing saved");

        let arm = AddNode { arch: "arm64".into(), ..node("second", "unix:///var/run/docker.sock") };
        let id = nodes::add_node(&env.pool, fleet, admin, &arm).await.unwrap();
        // Written with the node (one commit): its architecture and who added it.
        assert_eq!(env.text(&format!("SELECT arch FROM nodes WHERE id = {id}")).await, "arm64");
        assert_eq!(env.scalar("SELECT actor_id FROM audit_log WHERE action = 'node.add'").await, admin);
        let dup = nodes::add_node(&env.pool, fleet, admin, &node("second", "unix:///var/run/docker.sock")).await.unwrap_err();
        assert!(matches!(dup, PlatformError::Conflict(_)), "{dup}");
        // One engine, one node: its GPUs would be offered twice.
        for same in [" unix:///var/run/docker.sock", "UNIX:////var/run//docker.sock/"] {
            let twin = nodes::add_node(&env.pool, fleet, admin, &node("third", same)).await.unwrap_err();
            assert!(matches!(&twin, PlatformError::Conflict(m) if m.contains("node second already has the engine")), "{same}: {twin}");
        }
        let listed = cluster::list_nodes(&env.pool).await.unwrap().into_iter().find(|n| n.id == id).unwrap();
        assert_eq!((listed.gpu_total, listed.gpu_models.join(","), listed.simulated), (2, "L40S".to_string(), true), "declared GPUs are labelled");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'node.add'").await, 1);

        // The monitor records heartbeats of engines that answer.
        sqlx::query("UPDATE nodes SET last_heartbeat = 0").execute(&env.pool).await.unwrap();
        let silent = nodes::monitor_once(&env.pool, fleet).await.unwrap();
        assert!(silent.is_empty(), "{silent:?}");
        assert_eq!(env.scalar(&format!("SELECT last_heartbeat > 0 FROM nodes WHERE id = {id}")).await, 1);

        // A reason is one line of text, or nothing changes.
        for bad in ["x".repeat(201), "line one\nline two".to_string()] {
            let got = transitions::node::set_state(&env.pool, Some(admin), id, NodeState::Draining, &bad).await;
            assert!(matches!(&got, Err(PlatformError::BadRequest(m)) if m.contains("one line of at most 200 characters")), "{got:?}");
            // The console's "mark lost" calls mark_lost itself: the same rule
            // (its reason is copied into every machine and task it ends).
            let got = transitions::node::mark_lost(&env.pool, Some(admin), id, &bad).await;
            assert!(matches!(&got, Err(PlatformError::BadRequest(m)) if m.contains("one line of at most 200 characters")), "{got:?}");
        }
        assert_eq!(env.text(&format!("SELECT state FROM nodes WHERE id = {id}")).await, "ready");
        // Drain, then lost: a lost node's state is final.
        transitions::node::set_state(&env.pool, Some(admin), id, NodeState::Draining, "maintenance").await.unwrap();
        assert_eq!(env.text(&format!("SELECT state || ':' || state_reason FROM nodes WHERE id = {id}")).await, "draining:maintenance");
        transitions::node::set_state(&env.pool, Some(admin), id, NodeState::Lost, "").await.unwrap();
        assert_eq!(env.text(&format!("SELECT state || ':' || state_reason FROM nodes WHERE id = {id}")).await, "lost:marked lost by an administrator");
        let again = transitions::node::set_state(&env.pool, Some(admin), id, NodeState::Ready, "").await.unwrap_err();
        assert!(matches!(again, PlatformError::Conflict(_)), "{again}");
    }
}

gantry_testkit::timed_test! {
    async fn a_node_with_live_machines_cannot_be_removed() {
        let env = env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        env.admissions.create(env.create(&alice, "busy", 1)).await.unwrap();
        let refused = transitions::node::remove(&env.pool, None, env.node_id).await.unwrap_err();
        assert!(refused.to_string().contains("still has 1 machine(s)"), "{refused}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, 1, "nothing removed");
    }
}

gantry_testkit::timed_test! {
    async fn a_node_holding_kept_volumes_is_not_removed_until_they_are_deleted() {
        let env = env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let machine = env.admissions.create(env.create(&alice, "keeper", 1)).await.unwrap().machine_id;
        env.drive().await;
        let keep = gantry_platform::machines::OperationRequest { machine_id: machine, kind: gantry_core::task::TaskKind::Delete, keep_volume: true };
        gantry_platform::machines::request_operation(&env.pool, &alice, keep).await.unwrap();
        env.drive().await;
        let (kept_id, volume): (i64, String) = sqlx::query_as("SELECT id, name FROM kept_volumes").fetch_one(&env.pool).await.unwrap();
        transitions::node::mark_lost(&env.pool, None, env.node_id, "power supply failed").await.unwrap();

        // Forgetting the volume would let the collector delete alice's data
        // once the repaired node's engine is added again.
        let refused = transitions::node::remove(&env.pool, None, env.node_id).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(m) if m.contains(&format!("1 kept data volume(s): {volume} (alice)"))), "{refused}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, 1, "nothing removed");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM kept_volumes").await, 1, "the volume is still kept");

        // Its owner deletes it (a lost node's engine is not needed for that);
        // then the node goes.
        gantry_platform::machines::delete_kept_volume(&env.pool, &alice, kept_id).await.unwrap();
        transitions::node::remove(&env.pool, None, env.node_id).await.unwrap();
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_removed_nodes_id_is_not_given_to_the_next_node() {
        let env = env("simulated", 2, 2).await;
        let top = env.scalar("SELECT MAX(id) FROM nodes").await;
        transitions::node::mark_lost(&env.pool, None, env.node_id, "retired").await.unwrap();
        transitions::node::remove(&env.pool, None, env.node_id).await.unwrap();
        let found = gantry_platform::gpus::simulated("fresh", &gantry_platform::gpus::SimulatedGpus { count: 1, model: "L40S".into(), memory_mb: 1024 });
        let reg = cluster::NodeRegistration {
            name: "fresh", region_code: "local", docker_endpoint: "simulated://fresh", volume_dir: "", executor: "simulated", cpu_count: 2, memory_mb: 1024, gpus: &found,
        };
        let fresh = cluster::register_node(&env.pool, reg).await.unwrap();
        // Every server caches engines by node id: a reused id would make
        // the others drive the removed node's engine for this one.
        assert!(fresh > top, "the new node got id {fresh}, the removed node's (highest was {top})");
    }
}

gantry_testkit::timed_test! {
    async fn migration_0022_keeps_every_node_and_skips_ids_still_held() {
        let dir = tempfile::tempdir().unwrap();
        let pool = gantry_platform::db::connect_file(&dir.path().join("old.db")).await.unwrap();
        let migrator = &gantry_platform::db::MIGRATOR;
        assert!(migrator.migrations.iter().any(|m| m.version == 22), "migration 0022 is compiled in");
        let before: Vec<_> = migrator.migrations.iter().filter(|m| m.version < 22).cloned().collect();
        sqlx::migrate::Migrator { migrations: std::borrow::Cow::Owned(before), ..sqlx::migrate::Migrator::DEFAULT }.run(&pool).await.unwrap();
        for sql in [
            "INSERT INTO nodes (id, name, region_id, docker_endpoint, executor, state, cpu_count, memory_mb, created_at, arch)
             VALUES (3, 'n3', 1, 'simulated://n3', 'simulated', 'ready', 8, 4096, 0, 'arm64')",
            "INSERT INTO gpus (id, node_id, idx, uuid, model, memory_mb, simulated) VALUES (1, 3, 0, 'GPU-a', 'A100', 1024, 1)",
            // A node removed before the migration still has history under id 9.
            "INSERT INTO gpu_rollup_1h (gpu_id, bucket_ms, machine_id, node_id, samples, minutes, util_mean, util_max, mem_mean, mem_max, mem_total,
                                        temp_mean, temp_max, power_mean, power_max) VALUES (5, 0, 0, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let row = "SELECT id || name || region_id || docker_endpoint || executor || state || cpu_count || memory_mb || arch FROM nodes";
        let old: String = sqlx::query_scalar(row).fetch_one(&pool).await.unwrap();
        gantry_platform::db::migrate(&pool).await.unwrap();
        let count = |sql: &'static str| {
            let pool = pool.clone();
            async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await.unwrap() }
        };
        assert_eq!(sqlx::query_scalar::<_, String>(row).fetch_one(&pool).await.unwrap(), old, "the node keeps its row and id");
        assert_eq!(count("SELECT COUNT(*) FROM gpus WHERE node_id = 3").await, 1, "its GPU is not cascaded away");
        assert_eq!(count("SELECT COUNT(*) FROM pragma_foreign_key_check").await, 0);
        assert_eq!(count("SELECT instr(sql, 'AUTOINCREMENT') > 0 FROM sqlite_master WHERE name = 'nodes'").await, 1);
        sqlx::query("INSERT INTO nodes (name, region_id, docker_endpoint, created_at) VALUES ('n4', 1, 'unix:///x', 0)").execute(&pool).await.unwrap();
        assert_eq!(count("SELECT MAX(id) FROM nodes").await, 10, "above the id telemetry still holds");
        assert!(sqlx::query("INSERT INTO nodes (name, region_id, docker_endpoint, created_at) VALUES ('n4', 1, 'unix:///y', 0)").execute(&pool).await.is_err(), "name unique");
        gantry_platform::db::migrate(&pool).await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn a_cluster_whose_nodes_were_all_removed_is_not_new_again() {
        let env = env("simulated", 2, 2).await;
        assert!(!gantry_platform::first_run::is_new_cluster(&env.pool).await.unwrap(), "it has a node");
        transitions::node::mark_lost(&env.pool, None, env.node_id, "retired").await.unwrap();
        transitions::node::remove(&env.pool, None, env.node_id).await.unwrap();
        // The next start must not grant the default group the first node's
        // GPUs again over an admin's own quota (say, an explicit 0).
        assert!(!gantry_platform::first_run::is_new_cluster(&env.pool).await.unwrap(), "no node now, but not a new installation");
    }
}

gantry_testkit::timed_test! {
    async fn a_node_without_gpus_shows_none_free() {
        let env = env("simulated", 2, 2).await;
        let reg = cluster::NodeRegistration {
            name: "cpu-only", region_code: "local", docker_endpoint: "simulated://cpu-only", volume_dir: "", executor: "simulated", cpu_count: 8, memory_mb: 4096, gpus: &[],
        };
        cluster::register_node(&env.pool, reg).await.unwrap();
        let nodes = cluster::list_nodes(&env.pool).await.unwrap();
        let cpu = nodes.iter().find(|n| n.name == "cpu-only").expect("listed");
        assert_eq!((cpu.gpu_total, cpu.gpu_free, cpu.gpu_gone), (0, 0, 0), "the Nodes page showed 1 / 0");
        let other = nodes.iter().find(|n| n.name != "cpu-only").unwrap();
        assert_eq!((other.gpu_total, other.gpu_free), (2, 2));
    }
}

gantry_testkit::timed_test! {
    async fn a_node_marked_lost_keeps_the_volumes_its_unfinished_tasks_were_keeping() {
        let env = env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        // A delete that keeps its volume, not run yet (its engine is silent).
        let keeper = env.admissions.create(env.create(&alice, "keeper", 1)).await.unwrap().machine_id;
        // A kept volume a new machine is being made on, not run yet.
        let source = env.admissions.create(env.create(&alice, "source", 1)).await.unwrap().machine_id;
        env.drive().await;
        let keep = |machine_id| gantry_platform::machines::OperationRequest { machine_id, kind: gantry_core::task::TaskKind::Delete, keep_volume: true };
        gantry_platform::machines::request_operation(&env.pool, &alice, keep(source)).await.unwrap();
        env.drive().await;
        let (kept_id, reused): (i64, String) = sqlx::query_as("SELECT id, name FROM kept_volumes").fetch_one(&env.pool).await.unwrap();
        let mut on_kept = env.create(&alice, "on-kept", 1);
        on_kept.kept_volume_id = Some(kept_id);
        env.admissions.create(on_kept).await.unwrap();
        assert_eq!(env.scalar("SELECT COUNT(*) FROM kept_volumes").await, 0, "taken by the create");
        gantry_platform::machines::request_operation(&env.pool, &alice, keep(keeper)).await.unwrap();
        let keepers_volume = env.text(&format!("SELECT volume_name FROM machines WHERE id = {keeper}")).await;

        transitions::node::mark_lost(&env.pool, None, env.node_id, "power supply failed").await.unwrap();
        let mut kept: Vec<String> = sqlx::query_scalar("SELECT name FROM kept_volumes ORDER BY name").fetch_all(&env.pool).await.unwrap();
        kept.sort();
        let mut wanted = vec![keepers_volume, reused];
        wanted.sort();
        assert_eq!(kept, wanted, "both volumes are still kept");
        let refused = transitions::node::remove(&env.pool, None, env.node_id).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(m) if m.contains("2 kept data volume(s)")), "{refused}");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_node_counts_the_machines_whose_volume_size_it_does_not_enforce() {
        let env = env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let unenforced = || async { cluster::list_nodes(&env.pool).await.unwrap().into_iter().find(|n| n.id == env.node_id).unwrap().unenforced_volumes };
        assert_eq!(unenforced().await, 0);
        env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        assert_eq!(unenforced().await, 0, "no volume yet");
        env.drive().await;
        // The simulated executor makes plain volumes (no loop device).
        assert_eq!(env.text("SELECT state FROM machines WHERE name = 'dev'").await, "running");
        assert_eq!(unenforced().await, 1, "told to the admin, not only the owner");
        env.admissions.create(env.create(&alice, "sized", 1)).await.unwrap();
        env.drive().await;
        // One whose volume is a loop device does not count.
        sqlx::query("UPDATE machines SET volume_enforced = 1 WHERE name = 'sized'").execute(&env.pool).await.unwrap();
        assert_eq!(unenforced().await, 1);
    }
}
