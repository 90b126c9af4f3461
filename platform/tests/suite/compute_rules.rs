//! A compute task its group's rules can never admit (GPUs per machine,
//! allowed models, the quota itself, CPU or memory per machine) fails at
//! once with the numbers, so it does not hold up its group's queue; one
//! that only waits for capacity or for quota in use keeps waiting. A task
//! naming no GPU model is matched against the models its group may use
//! only, and a model name is held to the same 64-character rule as
//! everywhere else.

use crate::reclaim_common;
use gantry_testkit::engine;

use engine::{compute_job, env, torch_catalogue, Env};
use gantry_platform::{
    accounts::User,
    compute::{self, Command, SubmitCompute},
    executor::{Executor, SimulatedExecutor},
    gpus::{self, SimulatedGpus},
    policy,
};

/// A group rule an admin sets, the request it makes impossible, and words
/// the refusal must hold.
type Case = (&'static str, fn(&mut SubmitCompute), Vec<&'static str>);

fn job(name: &str) -> SubmitCompute {
    compute_job(name, Command::Argv(vec!["true".into()]))
}

/// An installation with the torch catalogue, a simulated engine and alice.
async fn setup(gpus: u32, quota: i64) -> (Env, SimulatedExecutor, User) {
    let env = env("simulated", gpus, quota).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    let root = reclaim_common::admin(&env.pool).await;
    torch_catalogue(&env, &root).await;
    let alice = env.user("alice", "ml-team").await;
    (env, sim, alice)
}

gantry_testkit::timed_test! {
    async fn a_task_the_group_can_never_admit_fails_at_once_and_the_next_one_runs() {
        let cases: Vec<Case> = vec![
            ("UPDATE groups SET max_gpus_per_machine = 2", |j| j.gpu_count = 64, vec!["at most 2 GPUs per machine", "64"]),
            ("UPDATE groups SET gpu_quota = 4", |j| j.gpu_count = 8, vec!["quota", "4 GPUs", "8"]),
            ("UPDATE groups SET max_cpus_per_machine = 1", |j| j.cpu_millis = 2000, vec!["at most 1 CPU(s) per machine", "asks for 2"]),
            ("UPDATE groups SET max_memory_gb_per_machine = 1", |j| j.memory_mb = 2048, vec!["at most 1 GB of memory", "2048 MB"]),
            (
                // An H100 on the node too: a model no GPU has is refused
                // before any group rule (see compute_queue_head).
                "INSERT INTO gpus (node_id, idx, uuid, model) SELECT id, 90, 'GPU-H100-' || id, 'H100' FROM nodes;
                 INSERT INTO group_gpu_models (group_id, model) SELECT id, 'SIM-A100' FROM groups",
                |j| j.gpu_model = Some("H100".into()),
                vec!["may not use H100 GPUs", "allowed: SIM-A100"],
            ),
        ];
        for (rule, ask, words) in cases {
            let (env, _sim, alice) = setup(2, 8).await;
            sqlx::raw_sql(rule).execute(&env.pool).await.unwrap();
            let mut impossible = job("too-big");
            ask(&mut impossible);
            let t = compute::submit(&env.pool, &env.admissions, &alice, &impossible).await.unwrap();
            assert_eq!(t.state, gantry_core::task::TaskState::Failed, "{rule}: {}", t.message);
            for w in &words {
                assert!(t.message.contains(w), "{rule}: {:?} lacks {w:?}", t.message);
            }

            let next = compute::submit(&env.pool, &env.admissions, &alice, &job("fits")).await.unwrap();
            assert_eq!(next.state, gantry_core::task::TaskState::Scheduled, "{rule}: {}", next.message);
            env.drive().await;
            assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", next.id)).await, "running", "{rule}");
            env.assert_quota_consistent().await;
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_queued_head_the_rules_changed_under_fails_and_frees_the_queue() {
        let (env, sim, alice) = setup(1, 4).await;
        let state = |id: i64| format!("SELECT state FROM compute_tasks WHERE id = {id}");
        let first = compute::submit(&env.pool, &env.admissions, &alice, &job("first")).await.unwrap();
        assert_eq!(first.state, gantry_core::task::TaskState::Scheduled, "{}", first.message);
        env.drive().await;
        let mut big = job("two-cpus");
        big.cpu_millis = 2000;
        let big = compute::submit(&env.pool, &env.admissions, &alice, &big).await.unwrap();
        let after = compute::submit(&env.pool, &env.admissions, &alice, &job("after")).await.unwrap();
        assert_eq!((big.state, after.state), (gantry_core::task::TaskState::Pending, gantry_core::task::TaskState::Pending), "both wait for the only GPU");

        // An admin tightens the rule while both wait: the head can never run.
        sqlx::query("UPDATE groups SET max_cpus_per_machine = 1").execute(&env.pool).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        assert_eq!(env.text(&state(big.id)).await, "failed");
        assert!(env.text(&format!("SELECT message FROM compute_tasks WHERE id = {}", big.id)).await.contains("at most 1 CPU(s)"));
        assert_eq!(env.text(&state(after.id)).await, "pending", "still waits for the GPU, not failed");

        // The GPU comes back: the task behind the failed head runs.
        let container = sim.containers().pop().unwrap();
        sim.simulate_exit(&container.id, 0).unwrap();
        compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&state(first.id)).await, "succeeded");
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        assert_eq!(env.text(&state(after.id)).await, "scheduled");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_task_waiting_for_capacity_or_quota_in_use_keeps_waiting() {
        // No free GPU on the node (quota to spare).
        let (env, _sim, alice) = setup(1, 4).await;
        let a = compute::submit(&env.pool, &env.admissions, &alice, &job("job-a")).await.unwrap();
        assert_eq!(a.state, gantry_core::task::TaskState::Scheduled, "{}", a.message);
        let b = compute::submit(&env.pool, &env.admissions, &alice, &job("job-b")).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        let b = compute::compute_task(&env.pool, &alice, b.id).await.unwrap();
        assert_eq!(b.state, gantry_core::task::TaskState::Pending, "capacity: {}", b.message);

        // A free GPU, but the group's quota is in use: admission refuses for now.
        let (env, _sim, alice) = setup(2, 1).await;
        let a = compute::submit(&env.pool, &env.admissions, &alice, &job("job-a")).await.unwrap();
        assert_eq!(a.state, gantry_core::task::TaskState::Scheduled, "{}", a.message);
        let b = compute::submit(&env.pool, &env.admissions, &alice, &job("job-b")).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        let b = compute::compute_task(&env.pool, &alice, b.id).await.unwrap();
        assert_eq!(b.state, gantry_core::task::TaskState::Pending, "quota in use: {}", b.message);
        assert!(b.message.contains("holds 1 of 1 GPU"), "{}", b.message);
        env.assert_quota_consistent().await;
    }
}

/// A node `name` in region `local` with `count` GPUs of `model`, on a
/// simulated engine of its own.
async fn node_of(env: &Env, name: &str, count: u32, model: &str) {
    let found = gpus::simulated(name, &SimulatedGpus { count, model: model.into(), memory_mb: 98_304 });
    let id = engine::register_simulated(&env.pool, name, &found).await.unwrap();
    env.dispatcher.fleet.insert(id, Executor::from(SimulatedExecutor::new()));
}

gantry_testkit::timed_test! {
    async fn a_gpu_model_of_up_to_64_characters_is_accepted_and_scheduled() {
        let (env, _sim, alice) = setup(1, 4).await;
        let model = "NVIDIA RTX PRO 6000 Blackwell Server Edition";
        node_of(&env, "blackwell", 1, model).await;
        let mut t = job("blackwell");
        t.gpu_model = Some(model.into());
        let t = compute::submit(&env.pool, &env.admissions, &alice, &t).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Scheduled, "{}", t.message);
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "running");

        let mut long = job("too-long");
        long.gpu_model = Some("X".repeat(65));
        let refused = compute::submit(&env.pool, &env.admissions, &alice, &long).await.unwrap_err();
        assert!(refused.to_string().contains("GPU model must be 1 to 64"), "{refused}");
    }
}

gantry_testkit::timed_test! {
    async fn a_task_naming_no_model_waits_for_a_model_its_group_may_use() {
        // The env's node has the only SIM-A100, held by alice's dev machine;
        // a second node has two free SIM-H100s, which ml-team may not use.
        let (env, _sim, alice) = setup(1, 4).await;
        let mut dev = env.create(&alice, "holds-a100", 1);
        dev.memory_mb = Some(256);
        env.admissions.create(dev).await.unwrap();
        env.drive().await;
        node_of(&env, "hopper", 2, "SIM-H100").await;
        let group = env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await;
        let max = env.scalar("SELECT max_gpus_per_machine FROM groups WHERE name = 'ml-team'").await;
        policy::update_group_policy(&env.pool, None, group, 4, max, &["SIM-A100".to_string()]).await.unwrap();

        let t = compute::submit(&env.pool, &env.admissions, &alice, &job("any-model")).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Pending, "{}", t.message);
        assert!(!t.message.contains("chosen"), "no region has a free GPU ml-team may use: {}", t.message);
        assert!(t.message.contains("of one model the group may use (SIM-A100)"), "{}", t.message);
        let decision = env.text(&format!("SELECT decision FROM compute_tasks WHERE id = {}", t.id)).await;
        assert!(decision.contains(r#""resource_set":[]"#), "{decision}");
    }
}
