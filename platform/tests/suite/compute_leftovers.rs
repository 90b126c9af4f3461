//! A compute task's machine never outlives its task: when the create
//! failed and the delete queued with that failure fails too, the watcher
//! keeps asking for the machine's delete (with backoff) until it goes —
//! its volume and its share of the node's CPU and memory with it.

use gantry_platform::{
    compute::{self, Command},
    executor::ExecError,
};
use gantry_testkit::engine::compute_job;

gantry_testkit::timed_test! {
    async fn a_failed_jobs_machine_whose_delete_failed_is_removed_by_the_watcher() {
        let (env, sim, _root, alice) = crate::compute_sim::sim_compute_env().await;
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
