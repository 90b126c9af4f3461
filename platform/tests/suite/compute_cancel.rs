//! A compute task's command runs at most once, and only if nobody cancelled
//! it first: a cancel that arrives while the task's machine is being made
//! stops it before the command starts; a create retried after the command
//! started takes the running job as it is; and a job that already ended
//! keeps its outcome.

use crate::compute_sim::sim_compute_env;
use gantry_testkit::engine;

use engine::compute_job;
use gantry_platform::{
    compute::{self, Command},
    executor::ExecError,
    PlatformError,
};
use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

/// Counts the containers the engine starts.
fn count_starts(sim: &gantry_platform::executor::SimulatedExecutor) -> Arc<AtomicUsize> {
    let starts = Arc::new(AtomicUsize::new(0));
    let counted = starts.clone();
    sim.on_start(Arc::new(move |_, _| {
        counted.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {})
    }));
    starts
}

gantry_testkit::timed_test! {
    async fn a_job_cancelled_while_its_machine_is_made_never_runs_its_command() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        let starts = count_starts(&sim);
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Scheduled, "{}", t.message);
        // Cancelled before the dispatcher has made its machine (the watcher,
        // which would cancel the create, has not run).
        compute::cancel(&env.pool, &alice, t.id).await.unwrap();
        env.drive().await;

        assert_eq!(starts.load(Ordering::SeqCst), 0, "the cancelled job's container was started");
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "cancelled");
        let machine = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", t.id)).await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {machine}")).await, "deleted");
        assert!(sim.containers().is_empty());
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_job_create_retried_after_its_start_does_not_run_the_command_again() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        let starts = count_starts(&sim);
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        // The container starts, then the engine stops answering before the
        // create has seen it run: the create waits to retry.
        sim.fail_next("inspect_container", ExecError::Unavailable("the engine went away".into()));
        env.drive().await;
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        let first = sim.containers();
        assert_eq!(env.text("SELECT state FROM tasks WHERE kind = 'create'").await, "scheduled", "the create waits to retry");

        sqlx::query("UPDATE tasks SET not_before = 0 WHERE kind = 'create'").execute(&env.pool).await.unwrap();
        env.drive().await;
        assert_eq!(env.scalar("SELECT attempts FROM tasks WHERE kind = 'create'").await, 2, "the create was retried");
        assert_eq!(starts.load(Ordering::SeqCst), 1, "the job's command ran a second time");
        assert_eq!(sim.containers().iter().map(|c| c.id.clone()).collect::<Vec<_>>(), vec![first[0].id.clone()], "the running job was replaced");
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "running");
    }
}

gantry_testkit::timed_test! {
    async fn a_job_that_already_exited_cannot_be_cancelled_into_a_failure() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        env.drive().await;
        sim.simulate_exit(&sim.containers().pop().unwrap().id, 0).unwrap();
        assert_eq!(compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap(), 1);
        // Its machine's delete is queued; the task still reads `running`.
        let refused = compute::cancel(&env.pool, &alice, t.id).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(m) if m.contains("already exited with code 0")), "{refused:?}");
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "succeeded");
        env.assert_quota_consistent().await;
    }
}
