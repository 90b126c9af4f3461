//! How a job's end is recorded: a job that exits by itself keeps its own
//! exit code, however late the watcher notices; only a stop the watcher
//! made for the time limit turns into a failure (exit 124 for a clean
//! stop); and the reason of a stop (a cancel, the time limit) survives a
//! watcher pass that was cut off after the stop, before it recorded why.

use crate::compute_sim::sim_compute_env;
use gantry_testkit::engine;

use engine::{compute_job, Env};
use gantry_platform::{
    accounts::User,
    compute::{self, Command},
    executor::{ExecError, SimulatedExecutor},
};

/// A running one-GPU job (time limit 600 s): (task id, its container).
async fn running_job(env: &Env, sim: &SimulatedExecutor, alice: &User) -> (i64, String) {
    let t =
        compute::submit(&env.pool, &env.admissions, alice, &compute_job("train", Command::Argv(vec!["true".into()])))
            .await
            .unwrap();
    env.drive().await;
    assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "running");
    (t.id, sim.containers().pop().unwrap().id)
}

/// The clock moves past the job's limit: the row's start, not the test, waits.
async fn past_time_limit(env: &Env, task: i64) {
    sqlx::query("UPDATE compute_tasks SET started_at = started_at - 100000 WHERE id = ?")
        .bind(task)
        .execute(&env.pool)
        .await
        .unwrap();
}

/// A watcher pass, then the job machine's delete: (state, exit code, message).
async fn watched_to_end(env: &Env, task: i64) -> (String, Option<i64>, String) {
    compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
    env.drive().await;
    env.assert_quota_consistent().await;
    sqlx::query_as("SELECT state, exit_code, message FROM compute_tasks WHERE id = ?")
        .bind(task)
        .fetch_one(&env.pool)
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    async fn a_job_that_exited_by_itself_keeps_its_exit_code_when_seen_after_its_limit() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        let (task, container) = running_job(&env, &sim, &alice).await;
        // It ended well within its limit; the watcher looks only after the
        // limit has passed (it was down, or its engine slow).
        sim.simulate_exit(&container, 0).unwrap();
        past_time_limit(&env, task).await;
        let (state, code, message) = watched_to_end(&env, task).await;
        assert_eq!((state.as_str(), code, message.as_str()), ("succeeded", Some(0), "exited with code 0"));
    }
}

gantry_testkit::timed_test! {
    async fn a_cancel_keeps_its_reason_when_the_pass_that_stopped_the_job_was_cut_off() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        let (task, container) = running_job(&env, &sim, &alice).await;
        compute::cancel(&env.pool, &alice, task).await.unwrap();
        // What a pass cut off by its node's budget leaves: the container
        // stopped, nothing recorded.
        sim.stop_container(&container).await.unwrap();
        let (state, _, message) = watched_to_end(&env, task).await;
        assert_eq!(state, "cancelled", "{message}");
        assert!(message.contains("cancelled by alice"), "{message}");
    }
}

gantry_testkit::timed_test! {
    async fn a_time_limit_keeps_its_reason_when_the_pass_that_stopped_the_job_was_cut_off() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        let (task, container) = running_job(&env, &sim, &alice).await;
        past_time_limit(&env, task).await;
        // The engine stops the job, but its answer never reaches the
        // watcher (it gave up on the node, or its pass was cut off).
        sim.fail_next("stop_container", ExecError::Unavailable("the engine stopped answering".into()));
        assert_eq!(compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap(), 0, "nothing recorded yet");
        sim.stop_container(&container).await.unwrap();
        // The stop left exit code 0 (the image exits cleanly on SIGTERM):
        // a time limit fails the task whatever the code.
        let (state, code, message) = watched_to_end(&env, task).await;
        assert_eq!((state.as_str(), code), ("failed", Some(124)), "{message}");
        assert!(message.contains("time limit of 600 s reached"), "{message}");
    }
}

gantry_testkit::timed_test! {
    async fn a_failed_start_whose_error_mentions_a_cancel_is_a_failure() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        // Nobody cancelled anything: the engine's own words say "cancelled".
        sim.fail_next("create_container", ExecError::Failed("image pull cancelled by the runtime".into()));
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        env.drive().await;
        let (state, message): (String, String) =
            sqlx::query_as("SELECT state, message FROM compute_tasks WHERE id = ?").bind(t.id).fetch_one(&env.pool).await.unwrap();
        assert_eq!(state, "failed", "{message}");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_second_watcher_that_finds_the_container_gone_does_not_overwrite_a_recorded_exit() {
        use gantry_platform::transitions;
        let (env, sim, _root, alice) = sim_compute_env().await;
        let (task, container) = running_job(&env, &sim, &alice).await;
        sim.simulate_exit(&container, 0).unwrap();
        // Server A's watcher records exit 0 and queues the machine's delete …
        compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let recorded = format!("SELECT exit_code || ':' || message || ':' || logs_tail FROM compute_tasks WHERE id = {task}");
        let before = env.text(&recorded).await;
        assert!(before.starts_with("0:exited with code 0"), "{before}");
        // … and server B, which read the row before that, saw the container
        // gone (the delete had removed it) and records what it saw.
        let mut tx = transitions::begin(&env.pool).await.unwrap();
        transitions::compute::exited(&mut tx, task, -1, "", "its container vanished").await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(env.text(&recorded).await, before, "the first recorded end stands");
        env.drive().await;
        let state = env.text(&format!("SELECT state FROM compute_tasks WHERE id = {task}")).await;
        assert_eq!(state, "succeeded");
    }
}

gantry_testkit::timed_test! {
    async fn a_job_whose_node_is_lost_before_it_started_failed_and_was_not_cancelled() {
        let (env, _sim, _root, alice) = sim_compute_env().await;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "scheduled");
        gantry_platform::transitions::node::mark_lost(&env.pool, None, env.node_id, "rack lost power").await.unwrap();
        let (state, message): (String, String) = sqlx::query_as("SELECT state, message FROM compute_tasks WHERE id = ?").bind(t.id).fetch_one(&env.pool).await.unwrap();
        assert_eq!(state, "failed", "nobody cancelled it: {message}");
        assert!(message.contains("rack lost power"), "{message}");
        env.assert_quota_consistent().await;
    }
}
