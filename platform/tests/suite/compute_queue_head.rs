//! Only the head of a group's queue is decided (first come, first served),
//! so a head that can never run must not stay pending: no node could hold
//! it (too many GPUs, CPUs or memory, a model none has), or a dataset
//! version it mounts is gone. Such a task is refused at submit or failed
//! with the numbers, and the task behind it runs; one that only waits for
//! free GPUs keeps waiting. A check that fails after the task is recorded
//! does not answer an error (a script would submit it twice). Nor can a
//! user's own machine hold up the queue by taking a job machine's name.

use crate::reclaim_common;
use gantry_testkit::engine;

use engine::{compute_job, env, torch_catalogue, Env};
use gantry_platform::{
    accounts::User,
    compute::{self, Command, SubmitCompute},
    datasets::mounts::DatasetMount,
    executor::{Executor, SimulatedExecutor},
    PlatformError,
};

fn job(name: &str) -> SubmitCompute {
    compute_job(name, Command::Argv(vec!["true".into()]))
}

/// The env's node (2 SIM-A100 GPUs, 2 CPUs, 1024 MB, quota 8), the torch
/// catalogue, a simulated engine and alice.
async fn setup() -> (Env, User) {
    let env = env("simulated", 2, 8).await;
    env.use_executor(Executor::from(SimulatedExecutor::new()));
    let root = reclaim_common::admin(&env.pool).await;
    torch_catalogue(&env, &root).await;
    let alice = env.user("alice", "ml-team").await;
    (env, alice)
}

fn state(id: i64) -> String {
    format!("SELECT state || ': ' || message FROM compute_tasks WHERE id = {id}")
}

/// The next task of the group is placed and runs.
async fn next_runs(env: &Env, alice: &User) {
    let next = compute::submit(&env.pool, &env.admissions, alice, &job("fits")).await.unwrap();
    assert_eq!(next.state, gantry_core::task::TaskState::Scheduled, "{}", next.message);
    env.drive().await;
    assert!(env.text(&state(next.id)).await.starts_with("running"));
    env.assert_quota_consistent().await;
}

gantry_testkit::timed_test! {
    async fn a_task_no_node_could_ever_hold_fails_at_submit_and_the_next_one_runs() {
        let cases: Vec<(fn(&mut SubmitCompute), Vec<&str>)> = vec![
            (|j| j.gpu_count = 3, vec!["asks for 3 GPU(s) of one model", "the most a node there has is 2 GPU(s)"]),
            (|j| j.cpu_millis = 4000, vec!["4 CPU(s) and 256 MB", "2 CPU(s) (node-"]),
            (|j| j.memory_mb = 2048, vec!["0.5 CPU(s) and 2048 MB of memory", "1024 MB of memory (node-"]),
        ];
        for (ask, words) in cases {
            let (env, alice) = setup().await;
            let mut big = job("too-big");
            ask(&mut big);
            let t = compute::submit(&env.pool, &env.admissions, &alice, &big).await.unwrap();
            assert_eq!(t.state, gantry_core::task::TaskState::Failed, "{}", t.message);
            for w in words.iter().chain(&["can never start: no node in any region could hold it"]) {
                assert!(t.message.contains(w), "{:?} lacks {w:?}", t.message);
            }
            next_runs(&env, &alice).await;
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_head_queued_before_the_check_fails_on_the_next_pass() {
        let (env, alice) = setup().await;
        // Recorded without the submit-time checks, as by an older server.
        let mut big = job("too-big");
        big.gpu_count = 4;
        let big = compute::record(&env.pool, &alice, &big).await.unwrap();
        let after = compute::record(&env.pool, &alice, &job("after")).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        let failed = env.text(&state(big)).await;
        assert!(failed.starts_with("failed: can never start: no node in any region could hold it") && failed.contains("asks for 4"), "{failed}");
        assert!(env.text(&state(after)).await.starts_with("scheduled"), "the task behind it is decided in the same pass");
    }
}

gantry_testkit::timed_test! {
    async fn a_node_that_is_down_may_come_back_but_a_lost_one_does_not() {
        let (env, alice) = setup().await;
        // A second, bigger node, down for now: a 4-GPU task waits for it.
        let found = gantry_platform::gpus::simulated("big-box", &gantry_platform::gpus::SimulatedGpus { count: 4, model: "SIM-A100".into(), memory_mb: 81_920 });
        let big_box = engine::register_simulated(&env.pool, "big-box", &found).await.unwrap();
        sqlx::query("UPDATE nodes SET state = 'down' WHERE id = ?").bind(big_box).execute(&env.pool).await.unwrap();
        let mut big = job("four");
        big.gpu_count = 4;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &big).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Pending, "{}", t.message);

        sqlx::query("UPDATE nodes SET state = 'lost' WHERE id = ?").bind(big_box).execute(&env.pool).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        let failed = env.text(&state(t.id)).await;
        assert!(failed.starts_with("failed: can never start") && failed.contains("the most a node there has is 2 GPU(s)"), "{failed}");
        next_runs(&env, &alice).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_gpu_model_no_gpu_has_is_refused_with_the_models_there_are() {
        let (env, alice) = setup().await;
        for (model, hint) in [("sim-a100", true), ("A100", false)] {
            let mut t = job("typo");
            t.gpu_model = Some(model.into());
            let err = compute::submit(&env.pool, &env.admissions, &alice, &t).await.unwrap_err();
            let PlatformError::BadRequest(why) = &err else { panic!("{model}: {err:?}") };
            assert!(why.contains(&format!("{model:?}")) && why.contains("the cluster has SIM-A100"), "{why}");
            assert_eq!(why.contains("did you mean \"SIM-A100\"?"), hint, "{why}");
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM compute_tasks").await, 0, "nothing recorded");
        let mut exact = job("exact");
        exact.gpu_model = Some("SIM-A100".into());
        assert_eq!(compute::submit(&env.pool, &env.admissions, &alice, &exact).await.unwrap().state, gantry_core::task::TaskState::Scheduled);
    }
}

/// A mount of a version that does not exist: resolved, then deleted.
fn deleted_mount() -> DatasetMount {
    DatasetMount {
        version_id: 987_654,
        name: "corpus/v1".into(),
        host_dir: "/nonexistent".into(),
        target: "/datasets/corpus/v1".into(),
    }
}

gantry_testkit::timed_test! {
    async fn a_dataset_version_deleted_during_submit_is_refused_and_records_nothing() {
        let (env, alice) = setup().await;
        let mut t = job("mounts");
        t.datasets = vec![deleted_mount()];
        let err = compute::submit(&env.pool, &env.admissions, &alice, &t).await.unwrap_err();
        assert!(matches!(&err, PlatformError::Conflict(why) if why.contains("dataset version corpus/v1 was deleted")), "{err:?}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM compute_tasks").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_queued_head_whose_dataset_version_is_gone_fails_and_frees_the_queue() {
        let (env, alice) = setup().await;
        // Recorded before the check existed: its version was deleted after.
        let head = compute::record(&env.pool, &alice, &job("mounts")).await.unwrap();
        let mounts = serde_json::to_string(&vec![deleted_mount()]).unwrap();
        sqlx::query("UPDATE compute_tasks SET datasets = ? WHERE id = ?").bind(mounts).bind(head).execute(&env.pool).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        let failed = env.text(&state(head)).await;
        assert!(failed.starts_with("failed: can never start: dataset version corpus/v1 it mounts was deleted"), "{failed}");
        next_runs(&env, &alice).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_check_that_fails_after_the_task_is_recorded_answers_the_task_not_an_error() {
        let (env, alice) = setup().await;
        // The catalogue becomes unreadable after `record` commits (as a
        // database error would): the task exists, so the answer is the
        // task, and the queue loop checks it again later.
        sqlx::query("DROP TABLE master_image_links").execute(&env.pool).await.unwrap();
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("once")).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Pending, "{}", t.message);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM compute_tasks").await, 1);
    }
}

gantry_testkit::timed_test! {
    async fn a_users_machine_named_like_a_job_does_not_block_the_queue() {
        let (env, alice) = setup().await;
        // Alice's dev machine carries the name job machines were given
        // (`job-{task}-{name}`): the name task #1 "fits" would have had.
        let mut dev = env.create(&alice, "job-1-fits", 1);
        dev.cpu_millis = Some(500);
        dev.memory_mb = Some(256);
        env.admissions.create(dev).await.unwrap();
        env.drive().await;
        next_runs(&env, &alice).await;

        // A job machine's name is one no person can choose.
        let name = env.text("SELECT m.name FROM compute_tasks c JOIN machines m ON m.id = c.machine_id").await;
        let refused = env.admissions.create(env.create(&alice, &name, 1)).await.unwrap_err();
        assert!(refused.to_string().contains("must start with a letter"), "{name}: {refused}");
    }
}
