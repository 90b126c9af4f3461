//! Races and refusals of the engine on the simulated executor: the
//! reconciler never overwrites a newer state, cancels refund or are refused
//! with the reason, and a task is executed by exactly one dispatcher.

use gantry_core::task::{MachineState, TaskKind};
use gantry_platform::{
    dispatch::{self, Dispatcher},
    executor::{ExecError, Executor, SimulatedExecutor},
    machines::{self, OperationRequest},
    reconcile, transitions,
};
use gantry_testkit::engine::{self, env, Env};
use std::sync::Arc;

async fn sim_env(gpus: u32, quota: i64) -> (Env, SimulatedExecutor) {
    let env = env("simulated", gpus, quota).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    (env, sim)
}

async fn rev(env: &Env, machine_id: i64) -> i64 {
    env.scalar(&format!("SELECT rev FROM machines WHERE id = {machine_id}")).await
}

/// What the reconciler would write from a stale read, applied after the
/// operation finished: it must be refused.
async fn stale_observation(env: &Env, machine_id: i64, read_rev: i64, seen: MachineState) -> bool {
    let mut tx = transitions::begin(&env.pool).await.unwrap();
    let applied = transitions::machine::observe_if_unchanged(&mut tx, machine_id, read_rev, seen, Some(0), "stale")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    applied
}

gantry_testkit::timed_test! {
    async fn the_reconciler_racing_a_delete_or_a_restart_never_resurrects_or_overwrites() {
        let (env, sim) = sim_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let a = env.admissions.create(env.create(&alice, "restarted", 1)).await.unwrap();
        let b = env.admissions.create(env.create(&alice, "deleted", 1)).await.unwrap();
        env.drive().await;

        // The reconciler reads both machines (and sees their containers
        // exited, say), then the operations finish before it writes.
        let (rev_a, rev_b) = (rev(&env, a.machine_id).await, rev(&env, b.machine_id).await);
        for (id, kind) in [(a.machine_id, TaskKind::Restart), (b.machine_id, TaskKind::Delete)] {
            machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: id, kind, keep_volume: false }).await.unwrap();
        }
        env.drive().await;
        assert!(!stale_observation(&env, a.machine_id, rev_a, MachineState::Stopped).await, "a finished restart is not overwritten");
        assert!(!stale_observation(&env, b.machine_id, rev_b, MachineState::Stopped).await, "a deleted machine is not resurrected");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", a.machine_id)).await, "running");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", b.machine_id)).await, "deleted");

        // While a task is open the reconciler keeps off the machine, even
        // with a fresh read.
        machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: a.machine_id, kind: TaskKind::Restart, keep_volume: false })
            .await
            .unwrap();
        let now = rev(&env, a.machine_id).await;
        assert!(!stale_observation(&env, a.machine_id, now, MachineState::Stopped).await, "a machine with a queued task is left alone");
        env.drive().await;

        // Reconciler passes running concurrently with many operations.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let looping = {
            let (pool, fleet, stop) = (env.pool.clone(), env.dispatcher.fleet.clone(), stop.clone());
            tokio::spawn(async move {
                let mut passes = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    reconcile::reconcile_once(&pool, &fleet).await.unwrap();
                    passes += 1;
                    tokio::task::yield_now().await;
                }
                passes
            })
        };
        for round in 0..15 {
            let made = env.admissions.create(env.create(&alice, &format!("r{round}"), 1)).await.unwrap();
            env.drive().await;
            for kind in [TaskKind::Restart, TaskKind::Reinstall, TaskKind::Delete] {
                machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: made.machine_id, kind, keep_volume: false }).await.unwrap();
                env.drive().await;
            }
            assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "deleted", "round {round}");
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(looping.await.unwrap() > 0);
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let containers: Vec<i64> = sim.containers().into_iter().map(|c| c.machine_id).collect();
        assert_eq!(containers, vec![a.machine_id], "only the live machine has a container");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines WHERE state NOT IN ('deleted')").await, 1);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn cancel_refunds_a_scheduled_create_and_refuses_a_running_task() {
        let (env, _sim) = sim_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let bob = env.user("bob", "ml-team").await;
        let made = env.admissions.create(env.create(&alice, "never", 2)).await.unwrap();
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {}", made.task_id)).await, "scheduled");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2);

        // Only the requester (or an admin) may cancel.
        let refused = transitions::task::cancel(&env.pool, &bob, made.task_id).await.unwrap_err().to_string();
        assert!(refused.contains("only the person who asked"), "{refused}");
        transitions::task::cancel(&env.pool, &alice, made.task_id).await.unwrap();
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {}", made.task_id)).await, "cancelled");
        let m = env.text(&format!("SELECT state || ': ' || message FROM machines WHERE id = {}", made.machine_id)).await;
        assert_eq!(m, "deleted: create cancelled by alice");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "refunded");
        assert_eq!(env.drive().await, 0, "nothing is left to run");
        let again = transitions::task::cancel(&env.pool, &alice, made.task_id).await.unwrap_err().to_string();
        assert!(again.contains("already been cancelled"), "{again}");

        // A running task is refused with the reason.
        let second = env.admissions.create(env.create(&alice, "busy", 1)).await.unwrap();
        let claimed = dispatch::claim(&env.pool, &env.dispatcher.owner, 1).await.unwrap();
        assert_eq!(claimed[0].id, second.task_id);
        let refused = transitions::task::cancel(&env.pool, &alice, second.task_id).await.unwrap_err().to_string();
        assert!(refused.contains("is running") && refused.contains("cannot be cancelled"), "{refused}");
        env.dispatcher.execute(claimed.into_iter().next().unwrap()).await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {}", second.task_id)).await, "succeeded");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn cancelling_a_create_whose_container_exists_deletes_it_before_its_gpus_return() {
        // Found by engine_invariant: cancelling here used to free the GPU
        // the created container is pinned to, before anything removed it.
        let (env, sim) = sim_env(1, 1).await;
        let alice = env.user("alice", "ml-team").await;
        sim.fail_next("start_container", ExecError::Unavailable("injected outage".into()));
        let made = env.admissions.create(env.create(&alice, "half", 1)).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {}", made.task_id)).await, "scheduled", "the start is retried");
        assert_eq!(sim.containers().len(), 1, "the container was created");
        transitions::task::cancel(&env.pool, &alice, made.task_id).await.unwrap();
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {}", made.task_id)).await, "cancelled");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "deleting");
        let delete = env.scalar(&format!("SELECT id FROM tasks WHERE machine_id = {} AND kind = 'delete' AND state = 'scheduled'", made.machine_id)).await;
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {}", made.machine_id)).await, 1, "the GPU stays claimed while its container exists");
        env.assert_quota_consistent().await;
        // The quota is still taken: a second machine does not fit yet.
        assert!(env.admissions.create(env.create(&alice, "next", 1)).await.is_err(), "the GPU is not free until the container is gone");
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {delete}")).await, "succeeded");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "deleted");
        assert!(sim.containers().is_empty(), "the container was removed");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {}", made.machine_id)).await, 0);
        env.assert_quota_consistent().await;
        env.admissions.create(env.create(&alice, "next", 1)).await.expect("the GPU is free again");
    }
}

gantry_testkit::timed_test! {
    async fn a_compute_task_whose_create_is_cancelled_that_way_ends_cancelled() {
        use gantry_platform::compute::{self, Command};
        let (env, sim) = sim_env(1, 1).await;
        let alice = env.user("alice", "ml-team").await;
        engine::torch_catalogue(&env, &alice).await;
        let job = engine::compute_job("job", Command::Argv(vec!["true".into()]));
        sim.fail_next("start_container", ExecError::Unavailable("injected outage".into()));
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        env.drive().await;
        assert_eq!(sim.containers().len(), 1, "the job's container was created; its start is retried");
        // The owner cancels the machine's create from the tasks page.
        let create = env.scalar(&format!("SELECT t.id FROM tasks t JOIN compute_tasks c ON c.machine_id = t.machine_id WHERE c.id = {} AND t.kind = 'create'", t.id)).await;
        transitions::task::cancel(&env.pool, &alice, create).await.unwrap();
        env.drive().await;
        let done = compute::compute_task(&env.pool, &alice, t.id).await.unwrap();
        assert_eq!(done.state, gantry_core::task::TaskState::Cancelled, "{}", done.message);
        assert!(sim.containers().is_empty(), "the container was removed");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn dispatchers_sharing_a_database_run_each_task_exactly_once() {
        let (env, _sim) = sim_env(16, 16).await;
        let alice = env.user("alice", "ml-team").await;
        // Three dispatchers of three "processes" over one database.
        let dispatchers: Vec<Dispatcher> = (0..3).map(|_| Dispatcher::new(env.pool.clone(), env.dispatcher.fleet.clone(), env.dispatcher.wake.clone(), 4)).collect();
        let handles: Vec<_> = dispatchers.iter().cloned().map(|d| tokio::spawn(d.run())).collect();
        let mut ids = Vec::new();
        for i in 0..16 {
            ids.push(env.admissions.create(env.create(&alice, &format!("m{i}"), 1)).await.unwrap().machine_id);
        }
        for id in &ids {
            machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: *id, kind: TaskKind::Restart, keep_volume: false }).await.ok();
        }
        // Wait for the queue to drain (event-driven: the dispatchers notify).
        loop {
            let open = env.scalar("SELECT COUNT(*) FROM tasks WHERE state IN ('pending', 'scheduled', 'running')").await;
            if open == 0 {
                break;
            }
            let _ = tokio::time::timeout(std::time::Duration::from_millis(200), env.dispatcher.wake.notified()).await;
        }
        for h in handles {
            h.abort();
        }
        let tasks = env.scalar("SELECT COUNT(*) FROM tasks").await;
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE state = 'succeeded' AND attempts = 1").await, tasks, "every task succeeded at its first claim");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'task.claim'").await, tasks, "one claim per task");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn one_broken_node_does_not_stop_the_reconciliation_of_the_others() {
        let (env, sim) = sim_env(1, 1).await;
        let alice = env.user("alice", "ml-team").await;
        let made = env.admissions.create(env.create(&alice, "healthy", 1)).await.unwrap();
        env.drive().await;
        // A node whose TLS certificates are missing: its executor cannot
        // even be made. That used to fail the whole pass.
        let gpus = gantry_platform::gpus::simulated("broken", &gantry_platform::gpus::SimulatedGpus { count: 1, model: "X".into(), memory_mb: 0 });
        std::env::set_var("GANTRY_DOCKER_CERT_DIR", env.dir.path().join("no-certs"));
        gantry_platform::cluster::register_node(
            &env.pool,
            gantry_platform::cluster::NodeRegistration {
                name: "broken",
                region_code: "local",
                docker_endpoint: "tls://127.0.0.1:9",
                volume_dir: "",
                executor: "docker",
                cpu_count: 0,
                memory_mb: 0,
                gpus: &gpus,
            },
        )
        .await
        .unwrap();
        let container = sim.containers()[0].id.clone();
        sim.simulate_exit(&container, 4).unwrap();
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(report.unreachable.iter().any(|u| u.starts_with("broken:") && u.contains("ca.pem")), "{report:?}");
        assert_eq!(report.changes, vec!["machine healthy: running → stopped (container exited with code 4)".to_string()]);
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "stopped");
    }
}
