//! Idle reclaim's races on the simulated engine: a reclaim resumed after
//! its container was removed still finishes (the image was already made),
//! and an extension or exemption committed while a pass runs stops the
//! reclaim that pass was about to queue. A restore whose container did
//! not stay up ends `reclaimed` again, whatever state the engine showed.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_core::task::{MachineState, TaskKind};
use gantry_platform::{
    dispatch,
    executor::{Executor, SimulatedExecutor},
    now, reclaim, transitions,
    transitions::run,
};
use reclaim_common::*;

gantry_testkit::timed_test! {
    async fn a_reclaim_resumed_after_removing_the_container_finishes() {
        // A process that died once the container was gone, before returning the GPUs.
        let (env, _sim, _alice, m, task) = reclaim_died_after_removing_the_container().await;

        env.expire_all_leases().await;
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "succeeded", "{message}");
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
        assert_eq!(env.text("SELECT state FROM snapshots WHERE origin = 'reclaim'").await, "ready");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn an_extension_or_exemption_made_during_a_pass_stops_the_reclaim() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 0, 2).await;
        let a = env.admissions.create(env.create(&alice, "box-a", 1)).await.unwrap().machine_id;
        let b = env.admissions.create(env.create(&alice, "box-b", 1)).await.unwrap().machine_id;
        env.drive().await;
        // The pass read both as past their deadline at `t` …
        let t = now();
        for m in [a, b] {
            assert!(transitions::reclaim::warn(&env.pool, m, t - 10, "idle").await.unwrap());
        }
        // … and before it queues: a is extended, b exempted (then its group).
        reclaim::extend(&env.pool, &alice, a).await.unwrap();
        assert_eq!(transitions::reclaim::queue(&env.pool, a, t, None, "idle").await.unwrap(), None, "extended");
        reclaim::set_machine_exempt(&env.pool, &root, b, true).await.unwrap();
        assert_eq!(transitions::reclaim::queue(&env.pool, b, t, None, "idle").await.unwrap(), None, "machine exempt");
        reclaim::set_machine_exempt(&env.pool, &root, b, false).await.unwrap();
        reclaim::set_group_exempt(&env.pool, &root, alice.group_id, true).await.unwrap();
        assert_eq!(transitions::reclaim::queue(&env.pool, b, t, None, "idle").await.unwrap(), None, "group exempt");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM snapshots").await, 0, "nothing written");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE kind = 'reclaim'").await, 0);

        // Nothing in the way: it is queued.
        reclaim::set_group_exempt(&env.pool, &root, alice.group_id, false).await.unwrap();
        assert!(transitions::reclaim::queue(&env.pool, b, t, None, "idle").await.unwrap().is_some());
    }
}

gantry_testkit::timed_test! {
    async fn a_snapshot_a_restore_is_under_way_from_cannot_be_deleted() {
        let env = engine::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let m = reclaimed(&env, &alice, "napper").await;
        let snapshot = env.scalar("SELECT id FROM snapshots WHERE origin = 'reclaim'").await;

        // Restore asked for and not yet run: its image must stay.
        let restore = transitions::reclaim::restore(&env.pool, &alice, m).await.unwrap();
        let refused = gantry_platform::snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snapshot).await.unwrap_err();
        assert!(refused.to_string().contains("is restored from snapshot"), "{refused}");
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, restore).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snapshot}")).await, "ready");
        env.assert_quota_consistent().await;
    }
}

/// A machine of `who`'s, made, found idle and reclaimed.
async fn reclaimed(env: &engine::Env, who: &gantry_platform::accounts::User, name: &str) -> i64 {
    let m = env.admissions.create(env.create(who, name, 1)).await.unwrap().machine_id;
    env.drive().await;
    let t = now();
    assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
    transitions::reclaim::queue(&env.pool, m, t, None, "idle reclaim").await.unwrap().expect("queued");
    env.drive().await;
    assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
    m
}

/// A ready user snapshot of a new running machine `name`: (machine, snapshot).
async fn snapshotted(env: &engine::Env, who: &gantry_platform::accounts::User, name: &str) -> (i64, i64) {
    let m = env.admissions.create(env.create(who, name, 1)).await.unwrap().machine_id;
    env.drive().await;
    let (snapshot, task) = gantry_platform::snapshots::request(&env.pool, who, m, "base").await.unwrap();
    env.drive().await;
    assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
    (m, snapshot)
}

gantry_testkit::timed_test! {
    async fn a_snapshot_a_reinstall_is_queued_from_cannot_be_deleted() {
        let env = engine::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let (m, snapshot) = snapshotted(&env, &alice, "source").await;

        // Queued, not run: the machine's container still uses its old image,
        // so the engine would let the snapshot's image go.
        let reinstall = gantry_platform::snapshots::reinstall_from(&env.pool, &alice, m, snapshot).await.unwrap();
        let refused = gantry_platform::snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snapshot).await.unwrap_err();
        assert!(matches!(refused, gantry_platform::PlatformError::Conflict(_)), "{refused:?}");
        assert!(refused.to_string().contains("machine source"), "{refused}");
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snapshot}")).await, "ready", "still usable");
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, reinstall).await;
        assert_eq!(state, "succeeded", "{message}");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_snapshot_a_live_machine_was_made_from_cannot_be_deleted() {
        let env = engine::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let (_, snapshot) = snapshotted(&env, &alice, "source").await;

        // Admitted, not yet created: no container uses the image yet.
        let copy = gantry_platform::snapshots::create_machine(&env.pool, env.create(&alice, "copy", 1), snapshot).await.unwrap().machine_id;
        let refused = gantry_platform::snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snapshot).await.unwrap_err();
        assert!(matches!(refused, gantry_platform::PlatformError::Conflict(_)), "{refused:?}");
        assert!(refused.to_string().contains("machine copy"), "{refused}");
        env.drive().await;
        assert_eq!(machine_state(&env.pool, copy).await.0, "running");

        // Running from it: still refused, by name.
        let refused = gantry_platform::snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snapshot).await.unwrap_err();
        assert!(refused.to_string().contains("machine copy"), "{refused}");
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snapshot}")).await, "ready");

        // Once the machine is deleted the snapshot goes.
        let delete = gantry_platform::machines::request_operation(
            &env.pool,
            &alice,
            gantry_platform::machines::OperationRequest { machine_id: copy, kind: gantry_core::task::TaskKind::Delete, keep_volume: false },
        )
        .await
        .unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, delete).await.0, "succeeded");
        // An engine that refuses leaves the snapshot as it was, usable.
        sim.fail_next("remove_image", gantry_platform::executor::ExecError::Failed("engine said no".into()));
        let refused = gantry_platform::snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snapshot).await.unwrap_err();
        // The engine's own words go to the log; the owner reads a plain reason.
        assert!(refused.to_string().contains("was not deleted") && !refused.to_string().contains("engine said no"), "{refused}");
        assert_eq!(env.text(&format!("SELECT state || '/' || message FROM snapshots WHERE id = {snapshot}")).await, "ready/");
        gantry_platform::snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snapshot).await.unwrap();
        assert_eq!(env.scalar("SELECT COUNT(*) FROM snapshots").await, 0);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_restore_keeps_to_the_groups_cpu_and_memory_limits() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let m = reclaimed(&env, &alice, "napper").await;

        // While it slept the group's limit went below its 2 CPUs.
        let group: i64 = env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await;
        gantry_platform::policy::update_machine_limits(&env.pool, None, group, 1, 64).await.unwrap();
        let refused = transitions::reclaim::restore(&env.pool, &alice, m).await.unwrap_err();
        assert!(matches!(refused, gantry_platform::PlatformError::Refused(_)), "{refused:?}");
        assert!(refused.to_string().contains("group ml-team may use at most 1 CPU(s) per machine; this machine asks for 2"), "{refused}");
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed", "nothing else changed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {m}")).await, 0);
        let (state, message) = task_outcome(&env.pool, env.scalar("SELECT MAX(id) FROM tasks WHERE kind = 'restore'").await).await;
        assert_eq!(state, "failed");
        assert!(message.contains("at most 1 CPU(s)"), "{message}");

        // Memory too; within both limits it comes back.
        gantry_platform::policy::update_machine_limits(&env.pool, None, group, 2, 3).await.unwrap();
        let refused = transitions::reclaim::restore(&env.pool, &alice, m).await.unwrap_err().to_string();
        assert!(refused.contains("at most 3 GB of memory per machine; this machine asks for 4096 MB"), "{refused}");
        gantry_platform::policy::update_machine_limits(&env.pool, None, group, 2, 4).await.unwrap();
        let restore = transitions::reclaim::restore(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, restore).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        env.assert_quota_consistent().await;
    }
}

/// A restore claimed by a runner of its own, whose container was seen gone
/// right after its start: the machine shows `failed` with the GPUs the
/// restore took. (The lease, for the caller to give up with or abandon.)
async fn restore_seen_failed(env: &engine::Env, m: i64) -> transitions::Lease {
    let runner = dispatch::new_owner_id();
    let claimed = dispatch::claim(&env.pool, &runner, 16).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let lease = claimed[0].lease.clone();
    run::begin(&env.pool, &lease, TaskKind::Restore, m).await.unwrap();
    run::observed(&env.pool, &lease, m, MachineState::Failed, None, "container not found").await.unwrap();
    assert_eq!(machine_state(&env.pool, m).await.0, "failed");
    assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {m}")).await, 1);
    lease
}

gantry_testkit::timed_test! {
    async fn a_restore_whose_container_failed_at_once_is_reclaimed_again() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let m = reclaimed(&env, &alice, "napper").await;
        let snapshot = env.scalar("SELECT id FROM snapshots WHERE origin = 'reclaim'").await;
        let restore = transitions::reclaim::restore(&env.pool, &alice, m).await.unwrap();
        let lease = restore_seen_failed(&env, m).await;

        // Giving up must not depend on the state the engine was seen in.
        transitions::reclaim::restore_failed(&env.pool, &lease, m, "the container did not stay running").await.unwrap();
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
        assert_eq!(task_outcome(&env.pool, restore).await.0, "failed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        assert_eq!(env.text(&format!("SELECT COALESCE(container_id, 'none') FROM machines WHERE id = {m}")).await, "none");
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snapshot}")).await, "ready", "its restore point is kept");
        env.assert_quota_consistent().await;

        // It can be restored again.
        let again = transitions::reclaim::restore(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, again).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_restore_resumed_after_its_container_failed_ends_reclaimed() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let m = reclaimed(&env, &alice, "napper").await;
        let restore = transitions::reclaim::restore(&env.pool, &alice, m).await.unwrap();
        // Its runner stops right after seeing the container gone, as a crash would.
        restore_seen_failed(&env, m).await;

        // The next runner finds the machine `failed`, not `creating`: the
        // restore still ends, and its GPUs come back.
        env.expire_all_leases().await;
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, restore).await;
        assert_eq!(state, "failed", "{message}");
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_restart_that_finished_after_the_pass_read_the_machine_calls_its_reclaim_off() {
        use gantry_platform::machines::{self, OperationRequest};
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "sleepy", 1)).await.unwrap().machine_id;
        env.drive().await;
        // Made a while ago, warned, its deadline passed.
        sqlx::query("UPDATE tasks SET updated_at = updated_at - 100000 WHERE machine_id = ?").bind(m).execute(&env.pool).await.unwrap();
        let t = now();
        assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
        // The pass reads when it last started …
        let read = transitions::reclaim::last_started(&mut env.pool.acquire().await.unwrap(), m).await.unwrap();
        // … the owner restarts it while the pass goes through other machines …
        machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: m, kind: TaskKind::Restart, keep_volume: false }).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        // … so the reclaim decided on the old start is not queued.
        assert_eq!(transitions::reclaim::queue(&env.pool, m, t, Some(read), "idle reclaim").await.unwrap(), None);
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM tasks WHERE machine_id = {m} AND kind = 'reclaim'")).await, 0);
        // A pass that reads the new start decides on it (and may queue).
        let now_read = transitions::reclaim::last_started(&mut env.pool.acquire().await.unwrap(), m).await.unwrap();
        assert!(now_read > read);
        assert!(transitions::reclaim::queue(&env.pool, m, t, Some(now_read), "idle reclaim").await.unwrap().is_some());
    }
}
