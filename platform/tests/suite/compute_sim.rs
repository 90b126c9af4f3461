//! The compute watcher on the simulated engine: a job machine's delete is
//! the system's to queue, so it is not lost when the person who submitted
//! the job can no longer see the machine (moved to another group), cancels
//! it, or the engine refuses it; a failed create's machine is deleted too.

use crate::reclaim_common;
use gantry_testkit::engine;

use engine::{compute_job, env, torch_catalogue, Env};
use gantry_core::matching::Arch;
use gantry_platform::{
    accounts, cluster,
    compute::{self, Command},
    executor::{ExecError, Executor, SimulatedExecutor},
    gpus::{self, SimulatedGpus},
    machines::{self, OperationRequest},
    transitions, PlatformError,
};

/// A second node in region `local` with 2 simulated GPUs, `cpus` CPUs and
/// `arch`, driven by an engine of its own.
/// A node of 2 simulated GPUs (quota 2) on the simulated engine, the torch
/// catalogue, an admin and alice: where a compute task runs without Docker.
pub(crate) async fn sim_compute_env() -> (Env, SimulatedExecutor, accounts::User, accounts::User) {
    let env = env("simulated", 2, 2).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    let root = reclaim_common::admin(&env.pool).await;
    let alice = env.user("alice", "ml-team").await;
    torch_catalogue(&env, &root).await;
    (env, sim, root, alice)
}

async fn second_node(env: &Env, name: &str, cpus: i64, arch: Arch) -> i64 {
    let found = gpus::simulated(name, &SimulatedGpus { count: 2, model: "SIM-A100-80GB".into(), memory_mb: 81_920 });
    let endpoint = format!("simulated://{name}");
    let registration = cluster::NodeRegistration {
        name,
        region_code: "local",
        docker_endpoint: &endpoint,
        volume_dir: "",
        executor: "simulated",
        cpu_count: cpus,
        memory_mb: 1 << 20,
        gpus: &found,
    };
    let id = cluster::register_node(&env.pool, registration).await.unwrap();
    cluster::set_node_arch(&env.pool, id, arch).await.unwrap();
    env.dispatcher.fleet.insert(id, Executor::from(SimulatedExecutor::new()));
    id
}

/// A running job whose container exited with 0 and whose machine's delete
/// the watcher queued: (compute task, machine).
async fn ended_job(env: &Env, sim: &SimulatedExecutor, alice: &accounts::User) -> (i64, i64) {
    let t =
        compute::submit(&env.pool, &env.admissions, alice, &compute_job("train", Command::Argv(vec!["true".into()])))
            .await
            .unwrap();
    env.drive().await;
    assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "running");
    sim.simulate_exit(&sim.containers().pop().unwrap().id, 0).unwrap();
    assert_eq!(compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap(), 1);
    (t.id, env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", t.id)).await)
}

/// The job ended well, its machine is gone and its GPU is back.
async fn assert_job_released(env: &Env, sim: &SimulatedExecutor, task: i64, machine: i64) {
    assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {task}")).await, "succeeded");
    assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {machine}")).await, "deleted");
    assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
    assert!(sim.containers().is_empty());
    env.assert_quota_consistent().await;
}

/// The open delete of `machine`: (id, seconds until it is due).
async fn open_delete(env: &Env, machine: i64) -> (i64, i64) {
    sqlx::query_as(&format!(
        "SELECT id, not_before - {} FROM tasks WHERE machine_id = {machine} AND kind = 'delete' AND state IN ('pending', 'scheduled')",
        gantry_platform::now()
    ))
    .fetch_one(&env.pool)
    .await
    .unwrap()
}

/// The node a compute task's machine was placed on.
async fn job_node(env: &Env, task: i64) -> i64 {
    env.scalar(&format!(
        "SELECT m.node_id FROM compute_tasks c JOIN machines m ON m.id = c.machine_id WHERE c.id = {task}"
    ))
    .await
}

gantry_testkit::timed_test! {
    async fn a_job_whose_requester_changed_group_still_gives_its_gpus_back() {
        let (env, sim, root, alice) = sim_compute_env().await;
        accounts::create_group(&env.pool, None, "vision", 2).await.unwrap();

        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Scheduled, "{}", t.message);
        env.drive().await;
        let state = |id: i64| format!("SELECT state FROM compute_tasks WHERE id = {id}");
        assert_eq!(env.text(&state(t.id)).await, "running");

        // Alice moves on; her job's container then ends by itself. Moving
        // her is refused while her job runs, so the move is made by hand,
        // as for an account moved before that rule existed.
        let refused = accounts::set_group(&env.pool, root.id, alice.id, "vision").await.unwrap_err();
        assert!(refused.to_string().contains("1 open compute task"), "{refused}");
        sqlx::query("UPDATE users SET group_id = (SELECT id FROM groups WHERE name = 'vision') WHERE id = ?").bind(alice.id).execute(&env.pool).await.unwrap();
        let container = sim.containers().pop().unwrap();
        sim.simulate_exit(&container.id, 0).unwrap();
        compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        env.drive().await;

        assert_eq!(env.text(&state(t.id)).await, "succeeded");
        assert_eq!(env.scalar(&format!("SELECT exit_code FROM compute_tasks WHERE id = {}", t.id)).await, 0);
        let machine = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", t.id)).await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {machine}")).await, "deleted");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "refunded to the group it was charged to");
        assert!(sim.containers().is_empty());
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_running_tasks_live_output_is_for_its_submitter_and_admins() {
        let env = env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        let bob = env.user("bob", "ml-team").await;
        torch_catalogue(&env, &root).await;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["sleep".into(), "60".into()]))).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "running");
        // What was kept earlier, told apart from the live output (the
        // simulated engine's is empty).
        sqlx::query("UPDATE compute_tasks SET logs_tail = 'kept earlier' WHERE id = ?").bind(t.id).execute(&env.pool).await.unwrap();
        let fleet = &env.dispatcher.fleet;
        assert_eq!(compute::output(&env.pool, fleet, &bob, t.id).await.unwrap(), "kept earlier", "a group member: the kept tail only");
        assert_eq!(compute::output(&env.pool, fleet, &alice, t.id).await.unwrap(), "", "the submitter: live");
        assert_eq!(compute::output(&env.pool, fleet, &root, t.id).await.unwrap(), "", "an admin: live");
    }
}

gantry_testkit::timed_test! {
    async fn a_job_runs_on_a_node_of_its_images_architecture() {
        // Region `local`: the env's node (4 GPUs) and an arm64 node with 2 —
        // fewer free GPUs, so packing alone would choose it — while the
        // only image is amd64.
        let env = env("simulated", 4, 4).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        cluster::set_node_arch(&env.pool, env.node_id, Arch::Amd64).await.unwrap();
        second_node(&env, "armbox", 64, Arch::Arm64).await;
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        torch_catalogue(&env, &root).await;

        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        env.drive().await;
        assert_eq!(job_node(&env, t.id).await, env.node_id, "the amd64 node");
        assert_eq!(sim.containers().len(), 1);
    }
}

gantry_testkit::timed_test! {
    async fn a_job_runs_on_a_node_with_room_for_its_cpu_and_memory() {
        // Two amd64 nodes in region `local`: the env's (4 GPUs, CPUs not
        // declared) and `small` (2 GPUs, 1 CPU) where a dev machine already
        // uses 800 of its 1,000 CPU thousandths. Packing alone prefers
        // `small` (fewest free GPUs); the job's 500 would overcommit it.
        let env = env("simulated", 4, 4).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let small = second_node(&env, "small", 1, Arch::Amd64).await;
        cluster::set_node_arch(&env.pool, env.node_id, Arch::Amd64).await.unwrap();
        sqlx::query("UPDATE nodes SET cpu_count = 0 WHERE id = ?").bind(env.node_id).execute(&env.pool).await.unwrap();
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        torch_catalogue(&env, &root).await;
        let mut dev = env.create(&alice, "busy-cpu", 1);
        dev.cpu_millis = Some(800);
        let dev = env.admissions.create(dev).await.unwrap().machine_id;
        assert_eq!(env.scalar(&format!("SELECT node_id FROM machines WHERE id = {dev}")).await, small, "packing put it on the smaller node");

        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        env.drive().await;
        assert_eq!(job_node(&env, t.id).await, env.node_id, "the node with CPU to spare");
    }
}

gantry_testkit::timed_test! {
    async fn the_systems_delete_of_a_job_machine_is_not_the_submitters_to_cancel() {
        let (env, sim, root, alice) = sim_compute_env().await;
        let (task, machine) = ended_job(&env, &sim, &alice).await;

        let (delete, _) = open_delete(&env, machine).await;
        let refused = transitions::task::cancel(&env.pool, &alice, delete).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("only an admin")), "{refused}");
        // An admin may; the watcher then queues it again, after a backoff.
        transitions::task::cancel(&env.pool, &root, delete).await.unwrap();
        compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let (again, due_in) = open_delete(&env, machine).await;
        assert!(again != delete && due_in > 0, "a new delete, not due at once ({due_in} s)");
        sqlx::query("UPDATE tasks SET not_before = 0").execute(&env.pool).await.unwrap();
        env.drive().await;
        assert_job_released(&env, &sim, task, machine).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_job_machines_delete_the_engine_refused_is_retried_by_the_watcher() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        let (task, machine) = ended_job(&env, &sim, &alice).await;

        sim.fail_next("remove_container", ExecError::Failed("device or resource busy".into()));
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {machine}")).await, "failed", "the delete gave up");
        compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let (_, due_in) = open_delete(&env, machine).await;
        assert!(due_in > 0, "retried after a backoff, not at once");
        compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM tasks WHERE machine_id = {machine} AND kind = 'delete'")).await, 2, "one retry queued");
        sqlx::query("UPDATE tasks SET not_before = 0").execute(&env.pool).await.unwrap();
        env.drive().await;
        assert_job_released(&env, &sim, task, machine).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_job_machine_whose_create_failed_is_deleted_and_frees_its_node() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        // The whole node's CPU, so a machine left behind would block the next.
        let mut job = compute_job("train", Command::Argv(vec!["true".into()]));
        job.cpu_millis = 2000;
        sim.set_images(Some(vec![]));
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Scheduled, "{}", t.message);
        env.drive().await;

        let (state, message) = (env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, env.text(&format!("SELECT message FROM compute_tasks WHERE id = {}", t.id)).await);
        assert!(state == "failed" && message.contains("image is not on its node"), "{state}: {message}");
        let machine = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", t.id)).await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {machine}")).await, "deleted");
        assert!(sim.volume_names().is_empty(), "{:?}", sim.volume_names());
        env.assert_quota_consistent().await;

        sim.set_images(None);
        let next = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        assert_eq!(next.state, gantry_core::task::TaskState::Scheduled, "the node's CPU is free again: {}", next.message);
    }
}

gantry_testkit::timed_test! {
    async fn a_failed_dev_create_leaves_its_nodes_cpu_to_compute_tasks() {
        let (env, sim, _root, alice) = sim_compute_env().await; // 2 CPUs, 1024 MB
        sim.set_images(Some(vec![]));
        let mut dev = env.create(&alice, "dev", 1);
        dev.cpu_millis = Some(2000);
        dev.memory_mb = Some(512);
        let made = env.admissions.create(dev).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "failed");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {}", made.machine_id)).await, 0);
        sim.set_images(None);
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Scheduled, "the node runs nothing: {}", t.message);
    }
}

gantry_testkit::timed_test! {
    async fn a_disabled_accounts_pending_tasks_never_start() {
        let env = env("simulated", 2, 4).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        let carol = env.user("carol", "ml-team").await;
        accounts::create_group(&env.pool, None, "vision", 2).await.unwrap();
        let bob = env.user("bob", "vision").await;
        torch_catalogue(&env, &root).await;
        // Bob holds the node's GPUs: the jobs must wait.
        let busy = env.admissions.create(env.create(&bob, "busy", 2)).await.unwrap().machine_id;
        env.drive().await;
        let job = compute_job("train", Command::Argv(vec!["true".into()]));
        let a = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        let c = compute::submit(&env.pool, &env.admissions, &carol, &job).await.unwrap();
        assert_eq!((a.state, c.state), (gantry_core::task::TaskState::Pending, gantry_core::task::TaskState::Pending));

        accounts::set_disabled(&env.pool, root.id, alice.id, true).await.unwrap();
        let state = |id: i64| format!("SELECT state FROM compute_tasks WHERE id = {id}");
        assert_eq!(env.text(&state(a.id)).await, "cancelled");
        let audit = env.text("SELECT detail FROM audit_log WHERE action = 'user.disable'").await;
        assert!(audit.contains("1 pending compute task"), "{audit}");
        // An account disabled otherwise (before this rule) is caught when placed.
        sqlx::query("UPDATE users SET disabled = 1 WHERE id = ?").bind(carol.id).execute(&env.pool).await.unwrap();

        machines::request_operation(&env.pool, &bob, OperationRequest { machine_id: busy, kind: gantry_core::task::TaskKind::Delete, keep_volume: false }).await.unwrap();
        env.drive().await;
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        assert_eq!(env.text(&state(c.id)).await, "cancelled");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        env.assert_quota_consistent().await;
    }
}
