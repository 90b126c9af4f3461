//! A node registering again after a reboot: its GPUs are matched by UUID,
//! not by position. NVML may list them in another order, and a GPU that
//! dropped off the bus shifts the positions of those after it; neither may
//! stop the server or move a machine's GPU under it. A held GPU that is
//! gone is marked so, and its row goes when its machine lets it go: it
//! must never come back as a free GPU that does not exist — but it may be
//! reported again, so a compute task waiting for it keeps waiting.

use gantry_testkit::engine;

use engine::{env, Env};
use gantry_core::task::TaskKind;
use gantry_platform::{
    accounts::User,
    cluster, compute,
    gpus::DiscoveredGpu,
    machines::{self, OperationRequest},
};
use std::collections::HashMap;

fn gpu(index: u32, uuid: &str) -> DiscoveredGpu {
    DiscoveredGpu { index, uuid: format!("GPU-{uuid}"), model: "SIM-A100".into(), memory_mb: 81920, simulated: true }
}

/// `uuids` in NVML order: the first is index 0.
fn gpus(uuids: &[&str]) -> Vec<DiscoveredGpu> {
    uuids.iter().enumerate().map(|(i, u)| gpu(i as u32, u)).collect()
}

/// Registers the env's node again, as a restarted `gantry serve` does.
async fn register(env: &Env, found: &[DiscoveredGpu]) -> Result<i64, gantry_platform::PlatformError> {
    let name = env.text(&format!("SELECT name FROM nodes WHERE id = {}", env.node_id)).await;
    gantry_testkit::engine::register_simulated(&env.pool, &name, found).await
}

/// uuid → (row id, idx) of the node's GPUs.
async fn rows(env: &Env) -> HashMap<String, (i64, i64)> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as("SELECT uuid, id, idx FROM gpus WHERE node_id = ?")
        .bind(env.node_id)
        .fetch_all(&env.pool)
        .await
        .unwrap();
    rows.into_iter().map(|(uuid, id, idx)| (uuid, (id, idx))).collect()
}

/// A machine of `owner` holding exactly the GPU `gpu_id`; returns its id.
async fn machine_holding(env: &Env, owner: &User, name: &str, gpu_id: i64) -> i64 {
    let admitted = env.admissions.create(env.create(owner, name, 1)).await.unwrap();
    sqlx::query("UPDATE machine_gpus SET gpu_id = ? WHERE machine_id = ?")
        .bind(gpu_id)
        .bind(admitted.machine_id)
        .execute(&env.pool)
        .await
        .unwrap();
    admitted.machine_id
}

async fn held_by(env: &Env, machine_id: i64) -> Vec<i64> {
    sqlx::query_scalar("SELECT gpu_id FROM machine_gpus WHERE machine_id = ?")
        .bind(machine_id)
        .fetch_all(&env.pool)
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    async fn a_gpu_dropping_off_the_bus_keeps_the_others_rows() {
        let env = env("simulated", 0, 8).await;
        register(&env, &gpus(&["A", "B", "C", "D"])).await.unwrap();
        let before = rows(&env).await;
        let alice = env.user("alice", "ml-team").await;
        let machine = machine_holding(&env, &alice, "on-c", before["GPU-C"].0).await;

        // B is gone: C and D move up one position.
        register(&env, &gpus(&["A", "C", "D"])).await.expect("re-registration must not trip over gpus.uuid");
        let after = rows(&env).await;
        for (uuid, idx) in [("GPU-A", 0), ("GPU-C", 1), ("GPU-D", 2)] {
            assert_eq!(after[uuid], (before[uuid].0, idx), "{uuid} keeps its row and takes its new index");
        }
        assert!(!after.contains_key("GPU-B"), "a free GPU that is gone is removed, as before");
        assert_eq!(held_by(&env, machine).await, vec![before["GPU-C"].0], "the machine still holds C itself");
    }
}

gantry_testkit::timed_test! {
    async fn a_held_gpu_that_is_gone_stays_with_its_machine() {
        let env = env("simulated", 0, 8).await;
        register(&env, &gpus(&["A", "B", "C", "D"])).await.unwrap();
        let before = rows(&env).await;
        let alice = env.user("alice", "ml-team").await;
        let machine = machine_holding(&env, &alice, "on-b", before["GPU-B"].0).await;

        // B is gone and a new card E takes position 3: no index is shared.
        register(&env, &gpus(&["A", "C", "D", "E"])).await.unwrap();
        let after = rows(&env).await;
        assert_eq!(after["GPU-B"].0, before["GPU-B"].0, "a held GPU is never freed by registration");
        assert_eq!(held_by(&env, machine).await, vec![before["GPU-B"].0]);
        for (uuid, idx) in [("GPU-A", 0), ("GPU-C", 1), ("GPU-D", 2)] {
            assert_eq!(after[uuid], (before[uuid].0, idx), "{uuid}");
        }
        assert_eq!(after["GPU-E"].1, 3, "the new card is added at its index");
        let indexes: std::collections::HashSet<i64> = after.values().map(|(_, idx)| *idx).collect();
        assert_eq!(indexes.len(), after.len(), "the kept GPU does not share an index with a present one");
    }
}

gantry_testkit::timed_test! {
    async fn a_reordered_gpu_list_keeps_every_row() {
        let env = env("simulated", 0, 8).await;
        register(&env, &gpus(&["A", "B", "C", "D"])).await.unwrap();
        let before = rows(&env).await;
        let alice = env.user("alice", "ml-team").await;
        let machine = machine_holding(&env, &alice, "on-a", before["GPU-A"].0).await;

        register(&env, &gpus(&["D", "C", "B", "A"])).await.expect("a new NVML order must not stop the server");
        let after = rows(&env).await;
        for (uuid, idx) in [("GPU-D", 0), ("GPU-C", 1), ("GPU-B", 2), ("GPU-A", 3)] {
            assert_eq!(after[uuid], (before[uuid].0, idx), "{uuid} keeps its row and takes its new index");
        }
        assert_eq!(after.len(), 4);
        assert_eq!(held_by(&env, machine).await, vec![before["GPU-A"].0]);
    }
}

/// Deletes the machine the way its owner does, and runs the delete.
async fn delete(env: &Env, owner: &User, machine_id: i64) {
    machines::request_operation(
        &env.pool,
        owner,
        OperationRequest { machine_id, kind: TaskKind::Delete, keep_volume: false },
    )
    .await
    .unwrap();
    env.drive().await;
    assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {machine_id}")).await, "deleted");
}

/// (total, free) GPUs of the env's node on the admin nodes page, and its
/// free GPUs as the compute matcher counts them.
async fn capacity(env: &Env) -> ((i64, i64), u32) {
    let node = cluster::list_nodes(&env.pool).await.unwrap().into_iter().find(|n| n.id == env.node_id).unwrap();
    let snapshot = compute::snapshot(&env.pool).await.unwrap();
    let matcher = snapshot
        .regions
        .iter()
        .flat_map(|r| &r.nodes)
        .find(|n| n.name == node.name)
        .map(|n| n.free_gpus.values().sum())
        .unwrap_or(0);
    ((node.gpu_total, node.gpu_free), matcher)
}

/// Since when the GPU has been marked gone, if it is.
async fn gone_since(env: &Env, gpu_id: i64) -> Option<i64> {
    sqlx::query_scalar("SELECT since FROM gpus_gone WHERE gpu_id = ?")
        .bind(gpu_id)
        .fetch_optional(&env.pool)
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    async fn a_gone_gpu_is_not_freed_when_its_machine_lets_it_go() {
        let env = env("simulated", 0, 8).await;
        register(&env, &gpus(&["A", "B"])).await.unwrap();
        let before = rows(&env).await;
        let alice = env.user("alice", "ml-team").await;
        let machine = machine_holding(&env, &alice, "on-b", before["GPU-B"].0).await;
        env.drive().await;

        // B falls off the bus; the server restarts and registers the node again.
        register(&env, &gpus(&["A"])).await.unwrap();
        assert_eq!(held_by(&env, machine).await, vec![before["GPU-B"].0], "its machine keeps B");
        delete(&env, &alice, machine).await;

        assert!(!rows(&env).await.contains_key("GPU-B"), "a gone GPU's row goes with its last holder");
        assert_eq!(capacity(&env).await, ((1, 1), 1), "the node offers A only");
        let bob = env.user("bob", "ml-team").await;
        let first = env.admissions.create(env.create(&bob, "first", 1)).await.unwrap();
        assert_eq!(held_by(&env, first.machine_id).await, vec![before["GPU-A"].0]);
        let second = env.admissions.create(env.create(&bob, "second", 1)).await;
        assert!(second.is_err(), "no second GPU exists: {:?}", second.map(|a| a.machine_id));
        env.assert_quota_consistent().await;
    }
}

/// A node with GPUs A and B, and alice's running machine on B: (env,
/// alice, machine, B's row id).
async fn running_on_b() -> (Env, User, i64, i64) {
    let env = env("simulated", 0, 8).await;
    register(&env, &gpus(&["A", "B"])).await.unwrap();
    let b = rows(&env).await["GPU-B"].0;
    let alice = env.user("alice", "ml-team").await;
    let machine = machine_holding(&env, &alice, "on-b", b).await;
    env.drive().await;
    (env, alice, machine, b)
}

gantry_testkit::timed_test! {
    async fn a_gone_gpu_reported_again_is_kept_and_offered() {
        let (env, alice, machine, b) = running_on_b().await;

        register(&env, &gpus(&["A"])).await.unwrap();
        assert!(gone_since(&env, b).await.is_some(), "a held GPU no longer reported is marked gone");
        // A loose card reseated: it is back before the machine lets it go.
        register(&env, &gpus(&["B", "A"])).await.unwrap();
        assert_eq!(gone_since(&env, b).await, None, "reported again: no longer gone");
        delete(&env, &alice, machine).await;

        assert_eq!(rows(&env).await["GPU-B"], (b, 0), "B keeps its row, at its reported index");
        assert_eq!(capacity(&env).await, ((2, 2), 2));
        let bob = env.user("bob", "ml-team").await;
        for name in ["first", "second"] {
            env.admissions.create(env.create(&bob, name, 1)).await.unwrap();
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_machine_on_a_gone_gpu_is_refused_a_restart_with_the_way_out() {
        let (env, alice, machine, _) = running_on_b().await;
        register(&env, &gpus(&["A"])).await.unwrap();

        let restart = |kind| OperationRequest { machine_id: machine, kind, keep_volume: false };
        for kind in [TaskKind::Restart, TaskKind::Reinstall] {
            let refused = machines::request_operation(&env.pool, &alice, restart(kind)).await.unwrap_err();
            assert!(refused.to_string().contains("cannot start: its GPU(s) #1 are no longer reported by its node"), "{refused}");
        }
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM tasks WHERE machine_id = {machine} AND kind IN ('restart', 'reinstall')")).await, 0);
        // The card is back: it starts again.
        register(&env, &gpus(&["A", "B"])).await.unwrap();
        machines::request_operation(&env.pool, &alice, restart(TaskKind::Restart)).await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn a_task_waiting_for_a_gone_gpu_keeps_waiting_as_it_may_come_back() {
        let env = env("simulated", 0, 8).await;
        register(&env, &gpus(&["A", "B", "C", "D"])).await.unwrap();
        let root = crate::reclaim_common::admin(&env.pool).await;
        engine::torch_catalogue(&env, &root).await;
        let alice = env.user("alice", "ml-team").await;
        machine_holding(&env, &alice, "on-d", rows(&env).await["GPU-D"].0).await;
        let mut four = engine::compute_job("four", compute::Command::Argv(vec!["true".into()]));
        four.gpu_count = 4;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &four).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Pending, "D is in use: {}", t.message);

        // D is no longer reported (a loose card), while its machine holds it.
        register(&env, &gpus(&["A", "B", "C"])).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        let now = env.text(&format!("SELECT state || ': ' || message FROM compute_tasks WHERE id = {}", t.id)).await;
        assert!(now.starts_with("pending"), "{now}");
    }
}

gantry_testkit::timed_test! {
    async fn a_gpu_reported_by_a_second_node_is_refused_by_name() {
        let env = env("simulated", 0, 1).await;
        gantry_testkit::engine::register_simulated(&env.pool, "node-a", &gpus(&["X"])).await.unwrap();
        let err = gantry_testkit::engine::register_simulated(&env.pool, "node-b", &gpus(&["X"])).await.unwrap_err();
        assert!(matches!(err, gantry_platform::PlatformError::Conflict(ref m) if m.contains("node-a") && m.contains("GPU-X")), "{err:?}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes WHERE name = 'node-b'").await, 0, "a refused registration writes nothing");
        // Once node-a is removed, the card is node-b's.
        let a = env.scalar("SELECT id FROM nodes WHERE name = 'node-a'").await;
        gantry_platform::transitions::node::mark_lost(&env.pool, None, a, "the card moved").await.unwrap();
        gantry_platform::transitions::node::remove(&env.pool, None, a).await.unwrap();
        let b = gantry_testkit::engine::register_simulated(&env.pool, "node-b", &gpus(&["X"])).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM gpus WHERE node_id = {b} AND uuid = 'GPU-X'")).await, 1);
    }
}

gantry_testkit::timed_test! {
    async fn a_machine_on_a_gone_gpu_is_refused_a_reinstall_from_a_snapshot_too() {
        let (env, alice, machine, _) = running_on_b().await;
        let (snap, taken) = gantry_platform::snapshots::request(&env.pool, &alice, machine, "before").await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {taken}")).await, "succeeded");
        register(&env, &gpus(&["A"])).await.unwrap();

        // As a plain reinstall is: its container would be removed and the
        // new one fail to start on the GPU runtime's own error.
        let refused = gantry_platform::snapshots::reinstall_from(&env.pool, &alice, machine, snap).await.unwrap_err();
        assert!(refused.to_string().contains("cannot start: its GPU(s) #1 are no longer reported by its node"), "{refused}");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM tasks WHERE machine_id = {machine} AND kind = 'reinstall'")).await, 0);
    }
}
