//! Admission and the task flow with the simulated executor: the quota
//! invariant under concurrency, refusals, isolation, retries.

use gantry_testkit::engine;

use engine::env;
use gantry_core::task::{MachineState, TaskKind, TaskState};
use gantry_platform::{
    executor::SimulatedExecutor,
    machines::{self, OperationRequest},
    PlatformError,
};

gantry_testkit::timed_test! {
    async fn two_hundred_concurrent_creates_against_a_quota_of_five() {
        let env = env("simulated", 8, 5).await;
        let alice = env.user("alice", "ml-team").await;
        let mut handles = Vec::new();
        for i in 0..200 {
            let (admissions, req) = (env.admissions.clone(), env.create(&alice, &format!("box-{i}"), 1));
            handles.push(tokio::spawn(async move { admissions.create(req).await }));
        }
        let mut granted = Vec::new();
        let mut refusals = Vec::new();
        for h in handles {
            match h.await.unwrap() {
                Ok(a) => granted.push(a),
                Err(PlatformError::Refused(msg)) => refusals.push(msg),
                Err(other) => panic!("unexpected error: {other}"),
            }
        }
        assert_eq!(granted.len(), 5);
        assert_eq!(refusals.len(), 195);
        assert!(refusals.iter().all(|m| m == "group ml-team holds 5 of 5 GPUs; this machine asks for 1"), "{:?}", &refusals[..3]);
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 5);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machine_gpus").await, 5);
        assert_eq!(env.scalar("SELECT COUNT(DISTINCT gpu_id) FROM machine_gpus").await, 5);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 5, "refusals create no machine");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE state = 'failed' AND machine_id IS NULL").await, 195);
    }
}

gantry_testkit::timed_test! {
    async fn refusals_name_the_rule_and_change_nothing() {
        let env = env("simulated", 4, 8).await;
        let alice = env.user("alice", "ml-team").await;
        sqlx::query("UPDATE groups SET max_gpus_per_machine = 2 WHERE name = 'ml-team'").execute(&env.pool).await.unwrap();
        let too_many = env.admissions.create(env.create(&alice, "big", 3)).await.unwrap_err();
        assert_eq!(too_many.to_string(), "group ml-team may use at most 2 GPUs per machine; this machine asks for 3");
        let mut wrong_model = env.create(&alice, "h100", 1);
        wrong_model.gpu_model = Some("H100".into());
        let none = env.admissions.create(wrong_model).await.unwrap_err();
        assert_eq!(none.to_string(), "no ready node has 1 free H100 GPU (most free on one node: 0)");
        let bad_name = env.admissions.create(env.create(&alice, "Bad Name", 1)).await.unwrap_err();
        assert!(matches!(bad_name, PlatformError::Invalid(_)), "{bad_name}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 0);
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn packing_fills_a_node_before_spreading_and_never_doubles_a_gpu() {
        let env = env("simulated", 4, 8).await;
        let alice = env.user("alice", "ml-team").await;
        let a = env.admissions.create(env.create(&alice, "one", 2)).await.unwrap();
        let dup = env.admissions.create(env.create(&alice, "one", 1)).await.unwrap_err();
        assert_eq!(dup.to_string(), "you already have a machine named \"one\"");
        let b = env.admissions.create(env.create(&alice, "two", 2)).await.unwrap();
        assert_eq!(a.gpu_indexes, vec![0, 1]);
        assert_eq!(b.gpu_indexes, vec![2, 3]);
        let full = env.admissions.create(env.create(&alice, "three", 1)).await.unwrap_err();
        assert_eq!(full.to_string(), "no ready node has 1 free GPU (most free on one node: 0)");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 2, "the duplicate wrote nothing");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 4);
    }
}

gantry_testkit::timed_test! {
    async fn create_then_delete_refunds_the_quota() {
        let env = env("simulated", 4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let made = env.admissions.create(env.create(&alice, "dev", 2)).await.unwrap();
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2);
        assert_eq!(env.drive().await, 1);
        let m = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
        assert_eq!(m.state, MachineState::Running);
        assert_eq!(*m.gpu_indexes, [0, 1]);
        assert!(m.simulated);
        let op = OperationRequest { machine_id: made.machine_id, kind: TaskKind::Delete, keep_volume: false };
        let first = machines::request_operation(&env.pool, &alice, op.clone()).await.unwrap();
        let again = machines::request_operation(&env.pool, &alice, op).await.unwrap();
        assert_eq!(again, first, "the same delete asked for twice is one task");
        env.drive().await;
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machine_gpus").await, 0);
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "deleted");
        let tasks = machines::list_tasks(&env.pool, &alice, Some(made.machine_id), 10).await.unwrap();
        assert_eq!(tasks[0].state, TaskState::Succeeded);
        assert_eq!(tasks[0].message, "deleted; 2 GPU(s) returned to the group's quota");
    }
}

gantry_testkit::timed_test! {
    async fn other_groups_neither_see_nor_touch_a_machine() {
        let env = env("simulated", 4, 4).await;
        gantry_platform::accounts::create_group(&env.pool, None, "vision", 4).await.unwrap();
        let alice = env.user("alice", "ml-team").await;
        let bob = env.user("bob", "vision").await;
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        assert!(machines::list_machines(&env.pool, &bob).await.unwrap().is_empty());
        assert!(machines::list_tasks(&env.pool, &bob, None, 10).await.unwrap().is_empty());
        let op = OperationRequest { machine_id: made.machine_id, kind: TaskKind::Delete, keep_volume: false };
        let err = machines::request_operation(&env.pool, &bob, op).await.unwrap_err();
        assert_eq!(err.to_string(), "machine not found");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE kind = 'delete'").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn an_unreachable_engine_is_retried_then_fails_clearly_and_refunds() {
        let env = env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        sim.set_available(false);
        env.use_executor(sim.into());
        let alice = env.user("alice", "ml-team").await;
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;
        let (state, message): (String, String) =
            sqlx::query_as("SELECT state, message FROM tasks WHERE id = ?").bind(made.task_id).fetch_one(&env.pool).await.unwrap();
        assert_eq!(state, "scheduled", "an unreachable engine is retried, nothing is lost");
        assert!(message.contains("retry 2 of 5 in 2 s"), "{message}");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 1, "the GPU stays reserved while retrying");

        // Fast-forward through the backoff to the last attempt.
        sqlx::query("UPDATE tasks SET attempts = 5, not_before = 0 WHERE id = ?").bind(made.task_id).execute(&env.pool).await.unwrap();
        env.drive().await;
        let (state, message): (String, String) =
            sqlx::query_as("SELECT state, message FROM tasks WHERE id = ?").bind(made.task_id).fetch_one(&env.pool).await.unwrap();
        assert_eq!(state, "failed");
        assert!(message.contains("did not answer") && message.contains("gave up after 6 attempts"), "{message}");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "failed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "a create that never ran gives its GPU back");
    }
}

gantry_testkit::timed_test! {
    async fn cpu_and_memory_stay_within_the_group_limits() {
        let env = env("simulated", 4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let group: i64 = env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await;
        gantry_platform::policy::update_machine_limits(&env.pool, None, group, 4, 8).await.unwrap();
        assert_eq!(gantry_platform::policy::machine_limits(&env.pool, group).await.unwrap(), (4, 8));
        let bad = gantry_platform::policy::update_machine_limits(&env.pool, None, group, 0, 8).await.unwrap_err();
        assert!(matches!(bad, PlatformError::Invalid(_)), "{bad}");

        let mut greedy = env.create(&alice, "greedy", 1);
        greedy.cpu_millis = Some(4500);
        let refused = env.admissions.create(greedy).await.unwrap_err();
        assert_eq!(refused.to_string(), "group ml-team may use at most 4 CPU(s) per machine; this machine asks for 4.5");
        let mut hungry = env.create(&alice, "hungry", 1);
        hungry.memory_mb = Some(9 * 1024);
        let refused = env.admissions.create(hungry).await.unwrap_err();
        assert_eq!(refused.to_string(), "group ml-team may use at most 8 GB of memory per machine; this machine asks for 9216 MB");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 0, "refusals write no machine");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE state = 'failed'").await, 2, "and show as failed tasks");

        let mut fits = env.create(&alice, "fits", 1);
        fits.cpu_millis = Some(500);
        fits.memory_mb = Some(8 * 1024);
        let made = env.admissions.create(fits).await.unwrap();
        let limits: (i64, i64, i64) = sqlx::query_as("SELECT cpu_millis, memory_mb, pids_limit FROM machines WHERE id = ?")
            .bind(made.machine_id)
            .fetch_one(&env.pool)
            .await
            .unwrap();
        assert_eq!(limits, (500, 8192, 4096));
        let defaults = env.admissions.create(env.create(&alice, "plain", 1)).await.unwrap();
        let limits: (i64, i64) = sqlx::query_as("SELECT cpu_millis, memory_mb FROM machines WHERE id = ?").bind(defaults.machine_id).fetch_one(&env.pool).await.unwrap();
        assert_eq!(limits, (2000, 4096), "defaults: 2 CPUs, 4 GB");
    }
}

gantry_testkit::timed_test! {
    async fn a_machine_asking_more_cpus_than_any_node_has_is_refused() {
        // The env's node declares 2 CPUs: the engine would refuse a larger
        // CPU limit only after the GPUs were taken.
        let env = env("simulated", 4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let node = env.text("SELECT name FROM nodes").await;
        let mut big = env.create(&alice, "big", 1);
        big.cpu_millis = Some(4000);
        let refused = env.admissions.create(big).await.unwrap_err();
        assert!(matches!(refused, PlatformError::Refused(_)), "{refused:?}");
        assert!(refused.to_string().contains(&format!("node {node} has 2 CPU(s); this machine asks for 4")), "{refused}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 0, "nothing written");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "quota untouched");

        let mut small = env.create(&alice, "small", 1);
        small.cpu_millis = Some(1000);
        let made = env.admissions.create(small).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT cpu_millis FROM machines WHERE id = {}", made.machine_id)).await, 1000);
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 1);

        // A node that declared no CPUs is not counted.
        sqlx::query("UPDATE nodes SET cpu_count = 0").execute(&env.pool).await.unwrap();
        let mut big = env.create(&alice, "big", 1);
        big.cpu_millis = Some(4000);
        env.admissions.create(big).await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn a_request_of_an_account_disabled_or_moved_meanwhile_is_refused() {
        let env = env("simulated", 4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        gantry_platform::accounts::create_group(&env.pool, None, "vision", 4).await.unwrap();
        let vision: i64 = env.scalar("SELECT id FROM groups WHERE name = 'vision'").await;
        // The request was made with the account as it was; it changed before admission.
        sqlx::query("UPDATE users SET group_id = ? WHERE id = ?").bind(vision).bind(alice.id).execute(&env.pool).await.unwrap();
        let moved = env.admissions.create(env.create(&alice, "one", 1)).await.unwrap_err();
        assert!(moved.to_string().contains("moved to another group"), "{moved}");
        sqlx::query("UPDATE users SET group_id = ?, disabled = 1 WHERE id = ?").bind(alice.group_id).bind(alice.id).execute(&env.pool).await.unwrap();
        let disabled = env.admissions.create(env.create(&alice, "two", 1)).await.unwrap_err();
        assert!(disabled.to_string().contains("was disabled"), "{disabled}");
        assert_eq!(env.scalar("SELECT COALESCE(SUM(gpus_in_use), 0) FROM groups").await, 0, "nothing was charged");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines WHERE state <> 'deleted'").await, 0);
    }
}
