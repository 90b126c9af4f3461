//! The compute watcher on the simulated engine: a job machine's delete is
//! the system's to queue, so it is not lost when the person who submitted
//! the job can no longer see the machine (moved to another group).

use crate::{common, reclaim_common};

use common::{compute_job, env, torch_catalogue, Env};
use gantry_core::matching::Arch;
use gantry_platform::{
    accounts, cluster,
    compute::{self, Command},
    executor::{Executor, SimulatedExecutor},
    gpus::{self, SimulatedGpus},
};

/// A second node in region `local` with 2 simulated GPUs, `cpus` CPUs and
/// `arch`, driven by an engine of its own.
async fn second_node(env: &Env, name: &str, cpus: i64, arch: Arch) -> i64 {
    let found = gpus::simulated(name, &SimulatedGpus { count: 2, model: "SIM-A100-80GB".into(), memory_mb: 81_920 });
    let endpoint = format!("simulated://{name}");
    let registration = cluster::NodeRegistration {
        name, region_code: "local", docker_endpoint: &endpoint, volume_dir: "", executor: "simulated", cpu_count: cpus, memory_mb: 1 << 20, gpus: &found,
    };
    let id = cluster::register_node(&env.pool, registration).await.unwrap();
    cluster::set_node_arch(&env.pool, id, arch).await.unwrap();
    env.dispatcher.fleet.insert(id, Executor::from(SimulatedExecutor::new()));
    id
}

/// The node a compute task's machine was placed on.
async fn job_node(env: &Env, task: i64) -> i64 {
    env.scalar(&format!("SELECT m.node_id FROM compute_tasks c JOIN machines m ON m.id = c.machine_id WHERE c.id = {task}")).await
}

gantry_testkit::timed_test! {
    async fn a_job_whose_requester_changed_group_still_gives_its_gpus_back() {
        let env = env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        torch_catalogue(&env, &root).await;
        accounts::create_group(&env.pool, None, "vision", 2).await.unwrap();

        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        assert_eq!(t.state, "scheduled", "{}", t.message);
        env.drive().await;
        let state = |id: i64| format!("SELECT state FROM compute_tasks WHERE id = {id}");
        assert_eq!(env.text(&state(t.id)).await, "running");

        // Alice moves on; her job's container then ends by itself.
        accounts::set_group(&env.pool, root.id, alice.id, "vision").await.unwrap();
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
