//! Edges of the transition module on the simulated engine: a delete that
//! already began on the engine cannot be cancelled (the machine would stay
//! `deleting` with its GPUs for ever), a lost node fails the snapshots it
//! was taking, a lost machine whose node was removed is still deleted, and
//! a runner stalled past its lease changes nothing once the task was
//! claimed again (even by its own process); a snapshot delete cut off
//! after its mark still finishes; a claim that waited for the write lock
//! still gets a whole lease.

use crate::reclaim_common;
use gantry_testkit::engine;

use engine::{env, Env};
use gantry_core::task::TaskKind;
use gantry_platform::{
    dispatch,
    executor::{ExecError, Executor, SimulatedExecutor},
    machines::{self, OperationRequest},
    snapshots, transitions, PlatformError,
};
use reclaim_common::{machine_state, task_outcome};

async fn sim_env(gpus: u32) -> (Env, SimulatedExecutor) {
    let env = env("simulated", gpus, gpus as i64).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    (env, sim)
}

fn delete(machine_id: i64) -> OperationRequest {
    OperationRequest { machine_id, kind: TaskKind::Delete, keep_volume: false }
}

/// Due now, whatever backoff the retries left.
async fn drive_now(env: &Env) {
    sqlx::query("UPDATE tasks SET not_before = 0").execute(&env.pool).await.unwrap();
    env.drive().await;
}

gantry_testkit::timed_test! {
    async fn a_delete_that_began_on_the_engine_cannot_be_cancelled() {
        let (env, sim) = sim_env(2).await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "doomed", 1)).await.unwrap().machine_id;
        env.drive().await;

        // The engine is away: the delete began (machine `deleting`) and waits to retry.
        sim.set_available(false);
        let task = machines::request_operation(&env.pool, &alice, delete(m)).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "scheduled");
        assert_eq!(machine_state(&env.pool, m).await.0, "deleting");
        let refused = transitions::task::cancel(&env.pool, &alice, task).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("cannot be cancelled")), "{refused}");
        assert_eq!(task_outcome(&env.pool, task).await.0, "scheduled", "the refusal changes nothing");

        // The engine is back: the delete completes and the GPU comes back.
        sim.set_available(true);
        drive_now(&env).await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "deleted");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        assert!(sim.containers().is_empty());
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn the_delete_that_replaces_a_cancelled_create_cannot_be_cancelled() {
        let (env, sim) = sim_env(2).await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "half-made", 1)).await.unwrap().machine_id;
        // Its container is made but the start waits to retry.
        sim.fail_next("start_container", ExecError::Unavailable("engine restarting".into()));
        env.drive().await;
        let create = env.scalar(&format!("SELECT id FROM tasks WHERE machine_id = {m} AND kind = 'create'")).await;
        transitions::task::cancel(&env.pool, &alice, create).await.unwrap();
        assert_eq!(machine_state(&env.pool, m).await.0, "deleting");
        let delete = env.scalar(&format!("SELECT id FROM tasks WHERE machine_id = {m} AND kind = 'delete'")).await;
        let refused = transitions::task::cancel(&env.pool, &alice, delete).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(_)), "{refused}");

        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "deleted");
        assert!(sim.containers().is_empty());
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_lost_node_fails_the_snapshots_it_was_taking() {
        let (env, _sim) = sim_env(2).await;
        let alice = env.user("alice", "ml-team").await;
        let a = env.admissions.create(env.create(&alice, "box-a", 1)).await.unwrap().machine_id;
        let b = env.admissions.create(env.create(&alice, "box-b", 1)).await.unwrap().machine_id;
        env.drive().await;
        // One snapshot is being taken (claimed, running), one waits for a dispatcher.
        let (running, _) = snapshots::request(&env.pool, &alice, b, "in-flight").await.unwrap();
        assert_eq!(dispatch::claim(&env.pool, &env.dispatcher.owner, 16).await.unwrap().len(), 1);
        let (waiting, _) = snapshots::request(&env.pool, &alice, a, "queued").await.unwrap();

        transitions::node::mark_lost(&env.pool, None, env.node_id, "flooded").await.unwrap();
        for snap in [running, waiting] {
            let view = snapshots::get(&env.pool, &alice, snap).await.unwrap();
            assert_eq!(view.state, gantry_core::snapshot::SnapshotState::Failed, "snapshot {}", view.name);
        }
        let group = alice.group_id;
        let mut conn = env.pool.acquire().await.unwrap();
        assert_eq!(snapshots::usage(&mut conn, group).await.unwrap().0, 0, "failed snapshots do not count");
        drop(conn);
        for snap in [running, waiting] {
            snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snap).await.unwrap();
        }
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_lost_machine_whose_node_was_removed_can_be_deleted() {
        let (env, _sim) = sim_env(2).await;
        let alice = env.user("alice", "ml-team").await;
        let a = env.admissions.create(env.create(&alice, "gone-a", 1)).await.unwrap().machine_id;
        let b = env.admissions.create(env.create(&alice, "gone-b", 1)).await.unwrap().machine_id;
        env.drive().await;
        transitions::node::mark_lost(&env.pool, None, env.node_id, "stolen").await.unwrap();
        transitions::node::remove(&env.pool, None, env.node_id).await.unwrap();

        let task = machines::request_operation(&env.pool, &alice, delete(a)).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded", "{}", task_outcome(&env.pool, task).await.1);
        assert_eq!(machine_state(&env.pool, a).await.0, "deleted");

        // Resumed after a crash right after it began (machine already `deleting`).
        let task = machines::request_operation(&env.pool, &alice, delete(b)).await.unwrap();
        assert!(env.drive_dying_at(0).await);
        assert_eq!(machine_state(&env.pool, b).await.0, "deleting");
        env.expire_all_leases().await;
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded", "{}", task_outcome(&env.pool, task).await.1);
        assert_eq!(machine_state(&env.pool, b).await.0, "deleted");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_runner_stalled_past_its_lease_is_fenced_out_when_its_own_process_claims_the_task_again() {
        let (env, sim) = sim_env(2).await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "stalled", 1)).await.unwrap().machine_id;
        let owner = &env.dispatcher.owner;
        let stalled = dispatch::claim(&env.pool, owner, 1).await.unwrap().remove(0);
        // Its renewals stall past the lease; this process's own expiry pass
        // requeues the task and its next claim takes it again, same owner id.
        env.expire_all_leases().await;
        let current = dispatch::claim(&env.pool, owner, 1).await.unwrap().remove(0);
        assert_eq!((current.id, &current.lease.owner), (stalled.id, &stalled.lease.owner));

        let now = gantry_platform::now();
        assert!(!transitions::lease::renew(&env.pool, &stalled.lease, now).await.unwrap(), "the stalled runner cannot renew");
        assert!(matches!(transitions::lease::fenced(&env.pool, &stalled.lease).await, Err(PlatformError::LeaseLost(_))));
        assert!(!transitions::lease::held(&env.pool, &stalled.lease).await.unwrap());
        // The stalled runner wakes up and carries on: it changes nothing.
        env.dispatcher.execute(stalled.clone()).await;
        assert_eq!(task_outcome(&env.pool, current.id).await.0, "running", "still the current runner's");
        assert!(sim.containers().is_empty(), "the stalled runner made no container");
        assert!(transitions::lease::renew(&env.pool, &current.lease, now).await.unwrap());

        env.dispatcher.execute(current.clone()).await;
        assert_eq!(task_outcome(&env.pool, current.id).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert_eq!(sim.containers().len(), 1);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_snapshot_delete_cut_off_after_its_mark_still_finishes() {
        use std::{future::Future, task::Poll};
        let (env, _sim) = sim_env(1).await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "box", 1)).await.unwrap().machine_id;
        env.drive().await;
        let (snap, _) = snapshots::request(&env.pool, &alice, m, "keepsake").await.unwrap();
        env.drive().await;
        assert_eq!(snapshots::get(&env.pool, &alice, snap).await.unwrap().state, gantry_core::snapshot::SnapshotState::Ready);

        // The client hangs up once the snapshot is marked as being deleted.
        let fleet = env.dispatcher.fleet.clone();
        let mut delete = Box::pin(snapshots::delete(&env.pool, &fleet, &alice, snap));
        let marked_or_gone = format!("SELECT COUNT(*) FROM snapshots WHERE id = {snap} AND COALESCE(message, '') <> 'being deleted'");
        loop {
            if let Poll::Ready(done) = std::future::poll_fn(|cx| Poll::Ready(delete.as_mut().poll(cx))).await {
                done.unwrap();
                break;
            }
            if env.scalar(&marked_or_gone).await == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        drop(delete);
        // It finishes all the same: the snapshot goes, its quota place with it.
        // (Another task: the database is the only thing to watch.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE id = {snap}")).await == 1 {
            assert!(std::time::Instant::now() < deadline, "the snapshot stayed marked as being deleted once its request was cut off");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'snapshot.delete'").await, 1);
    }
}

gantry_testkit::timed_test! {
    async fn a_claim_that_waited_for_the_write_lock_gets_a_whole_lease() {
        use std::{sync::Arc, time::Duration};
        const LEASE: i64 = 3;
        let (env, _sim) = sim_env(1).await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "late", 1)).await.unwrap().machine_id;
        let in_use = |pool: &gantry_platform::db::Pool| (pool.size() as usize).saturating_sub(pool.num_idle());

        // Every connection back in the pool (one is returned by a task of
        // its own after its commit), so the pass's is the only one taken …
        while in_use(&env.pool) > 0 {
            tokio::task::yield_now().await;
        }
        // … besides that of another writer, which holds SQLite's write lock.
        let hold = transitions::begin(&env.pool).await.unwrap();
        let busy = in_use(&env.pool);
        // The runner stops where it begins (as a crash would), leaving the
        // lease as its claim wrote it.
        let (begun_tx, mut begun) = tokio::sync::mpsc::unbounded_channel();
        let mut dispatcher = env.dispatcher.clone();
        dispatcher.lease_secs = LEASE;
        dispatcher.hook = Some(Arc::new(move |task, _| begun_tx.send((task.id, task.attempts)).is_ok()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(dispatcher.run_until(async move { let _ = stopped.await; }, Duration::ZERO));
        // A connection taken: the pass has read its clock and waits for the lock …
        while in_use(&env.pool) <= busy {
            tokio::task::yield_now().await;
        }
        // … for longer than a lease (the stall being simulated, not a wait for it).
        let seen = gantry_platform::now();
        while gantry_platform::now() < seen + LEASE {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let released_at = gantry_platform::now();
        hold.rollback().await.unwrap();

        let (task, attempt) = begun.recv().await.unwrap();
        let (expires, attempts): (i64, i64) =
            sqlx::query_as("SELECT lease_expires, attempts FROM tasks WHERE id = ?").bind(task).fetch_one(&env.pool).await.unwrap();
        // Counted from when the claim got the lock: not already run out,
        // so no other pass requeues the task while its runner works.
        assert!(expires >= released_at + LEASE, "lease expires at {expires}, the claim got the lock at {released_at} or later");
        assert_eq!((attempt, attempts), (1, 1), "claimed once");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'task.lease_expired'").await, 0);
        assert_eq!(env.scalar(&format!("SELECT machine_id FROM tasks WHERE id = {task}")).await, m);
        let _ = stop.send(());
        running.await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn a_reinstall_that_began_on_the_engine_cannot_be_cancelled() {
        let (env, sim) = sim_env(2).await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "redo", 1)).await.unwrap().machine_id;
        env.drive().await;

        // The engine is away: the reinstall began (machine `reinstalling`) and waits to retry.
        sim.set_available(false);
        let task = machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: m, kind: TaskKind::Reinstall, keep_volume: false }).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "scheduled");
        assert_eq!(machine_state(&env.pool, m).await.0, "reinstalling");
        // Cancelled, it would leave the machine `reinstalling` for ever: no
        // operation (not even a delete) is accepted from there.
        let refused = transitions::task::cancel(&env.pool, &alice, task).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("cannot be cancelled")), "{refused}");

        sim.set_available(true);
        drive_now(&env).await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_task_resumed_after_its_container_state_was_recorded_takes_that_as_its_outcome() {
        // The runner records the container's state, then stops before
        // recording the task's outcome (a crash, a shutdown past its grace,
        // a stalled last write). Resumed, the task must not act again: a
        // create used to fail ("a running machine cannot become creating")
        // and remove the working container; a restart restarted twice.
        let (env, sim) = sim_env(2).await;
        let starts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = starts.clone();
        sim.on_start(std::sync::Arc::new(move |_, _| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async {})
        }));
        let alice = env.user("alice", "ml-team").await;
        let made = env.admissions.create(env.create(&alice, "observed", 1)).await.unwrap();
        assert!(env.drive_dying_at_step("observed").await);
        let first: Vec<String> = sim.containers().into_iter().map(|c| c.id).collect();
        assert_eq!(first.len(), 1);
        env.expire_all_leases().await;
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, made.task_id).await;
        assert_eq!(state, "succeeded", "{message}");
        assert!(message.starts_with("created; running on"), "{message}");
        assert_eq!(machine_state(&env.pool, made.machine_id).await.0, "running");
        assert_eq!(sim.containers().into_iter().map(|c| c.id).collect::<Vec<_>>(), first, "the container it made is kept");
        assert_eq!(starts.load(std::sync::atomic::Ordering::SeqCst), 1, "started once");

        let restart = OperationRequest { machine_id: made.machine_id, kind: TaskKind::Restart, keep_volume: false };
        let task = machines::request_operation(&env.pool, &alice, restart).await.unwrap();
        assert!(env.drive_dying_at_step("observed").await);
        env.expire_all_leases().await;
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "succeeded", "{message}");
        assert!(message.starts_with("restarted on"), "{message}");
        assert_eq!(starts.load(std::sync::atomic::Ordering::SeqCst), 2, "restarted once");
        assert_eq!(machine_state(&env.pool, made.machine_id).await.0, "running");
        env.assert_quota_consistent().await;
    }
}
