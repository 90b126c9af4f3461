//! A compute task's machine never outlives its task: when the create
//! failed and the delete queued with that failure fails too, the watcher
//! keeps asking for the machine's delete (with backoff) until it goes —
//! its volume and its share of the node's CPU and memory with it.

use crate::common::{compute_job, env, torch_catalogue};
use crate::reclaim_common;
use gantry_platform::{
    compute::{self, Command},
    executor::{ExecError, Executor, SimulatedExecutor},
};

gantry_testkit::timed_test! {
    async fn a_failed_jobs_machine_whose_delete_failed_is_removed_by_the_watcher() {
        let env = env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        torch_catalogue(&env, &root).await;
        let mut job = compute_job("train", Command::Argv(vec!["true".into()]));
        job.cpu_millis = 2000;
        // The image is missing (the create fails) and the engine then refuses
        // to remove the volume (the delete queued with that failure fails).
        sim.set_images(Some(vec![]));
        sim.fail_next("remove_volume", ExecError::Failed("device or resource busy".into()));
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "failed");
        let machine = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", t.id)).await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {machine}")).await, "failed", "the crash point: left behind");

        // The watcher asks again; once that delete is due it succeeds.
        assert_eq!(compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap(), 1);
        sqlx::query("UPDATE tasks SET not_before = 0").execute(&env.pool).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {machine}")).await, "deleted");
        assert!(sim.volume_names().is_empty(), "{:?}", sim.volume_names());
        assert_eq!(compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap(), 0, "nothing left to do");
        env.assert_quota_consistent().await;
    }
}
