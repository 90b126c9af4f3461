//! A task is placed only where a node with room has an image for it of the
//! node's architecture, so "could a node ever hold it" counts those nodes
//! only. Before, a big node in a region without the image, or nodes of
//! another architecture than the image's, kept a task no node could run
//! pending for ever — and its group's whole queue behind it.

use crate::reclaim_common;
use gantry_testkit::engine;

use engine::{compute_job, env, torch_catalogue, Env};
use gantry_core::matching::Arch;
use gantry_platform::{
    accounts::User,
    catalogue, cluster,
    compute::{self, Command, SubmitCompute},
    executor::{Executor, SimulatedExecutor},
    gpus::{self, SimulatedGpus},
};

fn job(name: &str, gpus: u32) -> SubmitCompute {
    let mut j = compute_job(name, Command::Argv(vec!["true".into()]));
    j.gpu_count = gpus;
    j
}

/// The env's node in region `local` (2 GPUs, the torch image there, amd64)
/// and a node of 8 GPUs in region `west`, which has no image for torch.
async fn setup() -> (Env, User) {
    let env = env("simulated", 2, 8).await;
    env.use_executor(Executor::from(SimulatedExecutor::new()));
    let root = reclaim_common::admin(&env.pool).await;
    torch_catalogue(&env, &root).await;
    catalogue::create_region(&env.pool, root.id, "west", "West", "").await.unwrap();
    let found = gpus::simulated("west-box", &SimulatedGpus { count: 8, model: "SIM-A100".into(), memory_mb: 81_920 });
    let registration = cluster::NodeRegistration {
        name: "west-box",
        region_code: "west",
        docker_endpoint: "simulated://west-box",
        volume_dir: "",
        executor: "simulated",
        cpu_count: 2,
        memory_mb: 1024,
        gpus: &found,
    };
    let id = cluster::register_node(&env.pool, registration).await.unwrap();
    env.dispatcher.fleet.insert(id, Executor::from(SimulatedExecutor::new()));
    let alice = env.user("alice", "ml-team").await;
    (env, alice)
}

gantry_testkit::timed_test! {
    async fn a_big_node_where_the_image_is_not_keeps_no_task_waiting() {
        let (env, alice) = setup().await;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("four", 4)).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Failed, "{}", t.message);
        assert!(t.message.starts_with("can never start: no node in a region with an image for it (local (amd64)) could hold it"), "{}", t.message);
        assert!(t.message.contains("the most a node there has is 2 GPU(s)"), "{}", t.message);
        let next = compute::submit(&env.pool, &env.admissions, &alice, &job("one", 1)).await.unwrap();
        assert_eq!(next.state, gantry_core::task::TaskState::Scheduled, "the task behind it is placed: {}", next.message);
    }
}

gantry_testkit::timed_test! {
    async fn an_image_no_node_of_its_architecture_can_run_keeps_no_task_waiting() {
        let (env, alice) = setup().await;
        cluster::set_node_arch(&env.pool, env.node_id, Arch::Arm64).await.unwrap();
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("one", 1)).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Failed, "{}", t.message);
        assert!(
            t.message.starts_with("can never start: no node in any region can run an image for it: its images are in local (amd64), and no node of that architecture"),
            "{}",
            t.message
        );
        // An amd64 node in `local` again: the same task now waits its turn or runs.
        cluster::set_node_arch(&env.pool, env.node_id, Arch::Amd64).await.unwrap();
        let again = compute::submit(&env.pool, &env.admissions, &alice, &job("one-again", 1)).await.unwrap();
        assert_eq!(again.state, gantry_core::task::TaskState::Scheduled, "{}", again.message);
    }
}
