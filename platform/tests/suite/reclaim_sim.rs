//! Idle reclaim's edges on the simulated engine (fast, no Docker): a busy
//! sample withdraws a warning, exempt machines are left alone, failures
//! change nothing they should not (a failed commit leaves the machine
//! running with its GPUs; a failed or cancelled restore gives the GPUs back
//! and leaves it reclaimed), a cancelled snapshot is marked failed, and a
//! reclaimed machine (no container) leaves its node's CPU and memory free.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_platform::{
    compute::{self, Command},
    executor::{ExecError, Executor, SimulatedExecutor},
    reclaim, snapshots, transitions,
};
use reclaim_common::*;

async fn gpu_of(env: &engine::Env, machine: i64) -> i64 {
    env.scalar(&format!("SELECT gpu_id FROM machine_gpus WHERE machine_id = {machine}")).await
}

gantry_testkit::timed_test! {
    async fn warnings_exemptions_failures_and_cancels() {
        let env = engine::env("simulated", 4, 4).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 0, 0).await;
        let a = env.admissions.create(env.create(&alice, "box-a", 1)).await.unwrap().machine_id;
        let b = env.admissions.create(env.create(&alice, "box-b", 1)).await.unwrap().machine_id;
        env.drive().await;
        let (ga, gb) = (gpu_of(&env, a).await, gpu_of(&env, b).await);
        let t0 = gantry_platform::now() + 5;
        steady(&env.pool, ga, env.node_id, Some(a), t0, t0 + 60, 1.0, 40.0).await;
        steady(&env.pool, gb, env.node_id, Some(b), t0, t0 + 60, 1.0, 40.0).await;

        // b is exempt: only a is warned.
        reclaim::set_machine_exempt(&env.pool, &root, b, true).await.unwrap();
        assert!(reclaim::set_machine_exempt(&env.pool, &alice, b, false).await.is_err(), "users cannot change exemptions");
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().warned, vec![a]);

        // Busy again: the warning is withdrawn, with the reason.
        steady(&env.pool, ga, env.node_id, Some(a), t0 + 70, t0 + 70, 50.0, 40.0).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 70).await.unwrap().cleared, vec![a]);
        let (kind, why) = events(&env.pool, a).await.pop().unwrap();
        assert_eq!(kind, "reclaim_cleared");
        assert!(why.contains("50 %"), "{why}");

        // Idle again: warned, then (grace 0) queued; the commit fails.
        steady(&env.pool, ga, env.node_id, Some(a), t0 + 80, t0 + 140, 0.0, 40.0).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 140).await.unwrap().warned, vec![a]);
        assert_eq!(reclaim::pass(&env.pool, t0 + 140).await.unwrap().reclaims_queued, vec![a]);
        sim.fail_next("commit_container", ExecError::Failed("disk full".into()));
        env.drive().await;
        assert_eq!(machine_state(&env.pool, a).await.0, "running", "a failed reclaim leaves the machine as it was");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {a}")).await, 1);
        assert_eq!(env.text("SELECT state FROM snapshots WHERE origin = 'reclaim'").await, "failed");
        env.assert_quota_consistent().await;

        // The next pass does not try again at once: it pushes the deadline
        // back; at that deadline, still idle, it tries again and succeeds.
        assert!(reclaim::pass(&env.pool, t0 + 140).await.unwrap().reclaims_queued.is_empty());
        let retry_at = t0 + 140 + gantry_core::reclaim::RETRY_MIN_SECS;
        steady(&env.pool, ga, env.node_id, Some(a), t0 + 150, retry_at, 0.0, 40.0).await;
        assert_eq!(reclaim::pass(&env.pool, retry_at).await.unwrap().reclaims_queued, vec![a]);
        env.drive().await;
        assert_eq!(machine_state(&env.pool, a).await.0, "reclaimed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 1);

        // A cancelled restore gives its GPUs back and stays reclaimed.
        let task = reclaim::restore(&env.pool, &alice, a).await.unwrap();
        assert_eq!(machine_state(&env.pool, a).await.0, "creating");
        transitions::task::cancel(&env.pool, &alice, task).await.unwrap();
        assert_eq!(machine_state(&env.pool, a).await.0, "reclaimed");
        env.assert_quota_consistent().await;
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 1);

        // A restore whose container cannot be created: GPUs back, reclaimed, can retry.
        reclaim::restore(&env.pool, &alice, a).await.unwrap();
        sim.fail_next("create_container", ExecError::Failed("no such image".into()));
        env.drive().await;
        let (state, message) = machine_state(&env.pool, a).await;
        assert_eq!(state, "reclaimed", "{message}");
        assert!(message.contains("restore failed"), "{message}");
        env.assert_quota_consistent().await;
        let task = reclaim::restore(&env.pool, &alice, a).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, a).await.0, "running");

        // A cancelled snapshot does not stay "creating".
        let (snap, task) = snapshots::request(&env.pool, &alice, b, "never").await.unwrap();
        transitions::task::cancel(&env.pool, &alice, task).await.unwrap();
        assert_eq!(snapshots::get(&env.pool, &alice, snap).await.unwrap().state, gantry_core::snapshot::SnapshotState::Failed);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_reclaimed_machine_leaves_its_nodes_cpu_and_memory_to_compute_tasks() {
        // The env's node: 2 CPUs and 1024 MB; a dev machine asks for all
        // the CPUs and half the memory, so a job must wait for it.
        let env = engine::env("simulated", 2, 4).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        engine::torch_catalogue(&env, &root).await;
        short_settings(&env.pool, &root, 0, 0).await;
        let mut dev = env.create(&alice, "idle-box", 1);
        dev.cpu_millis = Some(2000);
        dev.memory_mb = Some(512);
        let dev = env.admissions.create(dev).await.unwrap().machine_id;
        env.drive().await;
        let job = compute::submit(&env.pool, &env.admissions, &alice, &engine::compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        assert_eq!(job.state, gantry_core::task::TaskState::Pending, "the dev machine holds the node's CPUs: {}", job.message);

        // Idle: warned, then (grace 0) reclaimed — its container is gone.
        let t0 = gantry_platform::now() + 5;
        steady(&env.pool, gpu_of(&env, dev).await, env.node_id, Some(dev), t0, t0 + 60, 0.0, 40.0).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().warned, vec![dev]);
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().reclaims_queued, vec![dev]);
        env.drive().await;
        assert_eq!(machine_state(&env.pool, dev).await.0, "reclaimed");

        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        let (state, message) = (
            env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", job.id)).await,
            env.text(&format!("SELECT message FROM compute_tasks WHERE id = {}", job.id)).await,
        );
        assert_eq!(state, "scheduled", "{message}");
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", job.id)).await, "running");
        env.assert_quota_consistent().await;
    }
}
