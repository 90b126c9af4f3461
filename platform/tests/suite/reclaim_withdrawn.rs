//! A queued idle reclaim that is no longer wanted does not run: an
//! extension, a withdrawn warning (GPUs busy again), an exemption or an
//! admin's cancel stop it before a runner starts it, and its runner stops
//! by itself if the warning changed after it was claimed. A warning does
//! not outlive its machine, and a failed reclaim waits before it is tried
//! again instead of failing at every pass. Simulated engine.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_core::task::TaskKind;
use gantry_platform::{
    dispatch,
    executor::{ExecError, Executor, SimulatedExecutor},
    machines::{self, OperationRequest},
    now, reclaim, transitions, PlatformError,
};
use reclaim_common::*;
use std::sync::Arc;

/// Running machines of `who`'s, each warned with a passed deadline and
/// its reclaim queued (not claimed): (machine, reclaim task) each.
async fn queued(env: &engine::Env, who: &gantry_platform::accounts::User, names: &[&str]) -> Vec<(i64, i64)> {
    let mut made = Vec::new();
    for name in names {
        made.push(env.admissions.create(env.create(who, name, 1)).await.unwrap().machine_id);
    }
    env.drive().await;
    let t = now();
    let mut out = Vec::new();
    for m in made {
        assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
        out.push((
            m,
            transitions::reclaim::queue(&env.pool, m, t, None, "idle reclaim").await.unwrap().expect("queued"),
        ));
    }
    out
}

async fn deadline(env: &engine::Env, m: i64) -> Option<i64> {
    sqlx::query_scalar("SELECT reclaim_deadline FROM machines WHERE id = ?").bind(m).fetch_one(&env.pool).await.unwrap()
}

async fn snapshot_state(env: &engine::Env, task: i64) -> String {
    env.text(&format!("SELECT s.state FROM snapshots s JOIN tasks t ON json_extract(t.payload, '$.snapshot_id') = s.id WHERE t.id = {task}")).await
}

/// The machine is as it was: running, its GPU held, its container there.
async fn untouched(env: &engine::Env, sim: &SimulatedExecutor, m: i64) {
    let (state, message) = machine_state(&env.pool, m).await;
    assert_eq!(state, "running", "{message}");
    assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {m}")).await, 1);
    assert!(sim.containers().iter().any(|c| c.machine_id == m), "its container is still there");
    env.assert_quota_consistent().await;
}

gantry_testkit::timed_test! {
    async fn an_extension_busy_gpus_or_an_exemption_cancel_the_queued_reclaim() {
        let env = engine::env("simulated", 4, 4).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 60, 2).await;
        let q = queued(&env, &alice, &["extended", "busy", "exempt"]).await;
        let [(extended, r1), (busy, r2), (exempt, r3)] = q[..] else { unreachable!() };

        let until = reclaim::extend(&env.pool, &alice, extended).await.unwrap();
        assert!(until > now(), "the new deadline is ahead");
        assert!(transitions::reclaim::clear(&env.pool, busy, "GPU utilisation 50 % is above the idle threshold again").await.unwrap());
        reclaim::set_machine_exempt(&env.pool, &root, exempt, true).await.unwrap();

        for (task, m) in [(r1, extended), (r2, busy), (r3, exempt)] {
            let (state, message) = task_outcome(&env.pool, task).await;
            assert_eq!(state, "cancelled", "task #{task}: {message}");
            assert!(message.starts_with("not reclaimed: "), "{message}");
            assert_eq!(snapshot_state(&env, task).await, "failed", "its snapshot ends with it");
            let (_, detail) = events(&env.pool, m).await.pop().unwrap();
            assert!(detail.contains(&format!("the queued reclaim (task #{task}) was cancelled")), "{detail}");
        }
        assert_eq!(deadline(&env, extended).await, Some(until), "the extension stands");
        assert_eq!(deadline(&env, busy).await, None, "withdrawn");
        assert!(deadline(&env, exempt).await.is_some(), "the next pass withdraws the warning, saying why");

        assert_eq!(env.drive().await, 0, "nothing left to run");
        for m in [extended, busy, exempt] {
            untouched(&env, &sim, m).await;
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_claimed_reclaim_refuses_an_extension_and_its_runner_stops_when_exempted() {
        let env = engine::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        let [(m, task)] = queued(&env, &alice, &["sleepy"]).await[..] else { unreachable!() };
        let claimed = dispatch::claim(&env.pool, &env.dispatcher.owner, 16).await.unwrap();
        assert_eq!(claimed.len(), 1);

        match reclaim::extend(&env.pool, &alice, m).await {
            Err(PlatformError::Conflict(why)) => assert!(why.contains("is being reclaimed now"), "{why}"),
            other => panic!("an extension of a reclaim under way was accepted: {other:?}"),
        }
        // Exempted while the runner holds it: the runner sees it first.
        reclaim::set_machine_exempt(&env.pool, &root, m, true).await.unwrap();
        for c in claimed {
            env.dispatcher.execute(c).await;
        }
        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "succeeded", "{message}");
        assert!(message.contains("not reclaimed") && message.contains("exempted"), "{message}");
        assert_eq!(snapshot_state(&env, task).await, "failed");
        assert!(sim.committed_images().is_empty(), "nothing was committed");
        untouched(&env, &sim, m).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_reclaim_resumed_after_its_commit_stops_when_the_warning_went() {
        let env = engine::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let [(m, task)] = queued(&env, &alice, &["sleepy"]).await[..] else { unreachable!() };

        // A runner dies after committing, before removing the container.
        let mut dying = env.dispatcher.clone();
        dying.owner = dispatch::new_owner_id();
        dying.hook = Some(Arc::new(|_, step| step == "removing the container"));
        for c in dispatch::claim(&env.pool, &dying.owner, 16).await.unwrap() {
            dying.execute(c).await;
        }
        assert_eq!(sim.committed_images().len(), 1, "committed before the crash");

        // Its GPUs are used again: the pass withdraws the warning.
        assert!(transitions::reclaim::clear(&env.pool, m, "GPU utilisation 80 % is above the idle threshold again").await.unwrap());
        assert_eq!(task_outcome(&env.pool, task).await.0, "running", "a claimed reclaim is left to its runner");
        env.expire_all_leases().await;
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "succeeded", "{message}");
        assert!(message.contains("not reclaimed: the warning was withdrawn"), "{message}");
        assert_eq!(snapshot_state(&env, task).await, "failed");
        assert!(sim.committed_images().is_empty(), "the orphaned image was removed");
        untouched(&env, &sim, m).await;
    }
}

gantry_testkit::timed_test! {
    async fn an_admin_cancel_withdraws_the_warning_so_the_next_pass_does_not_requeue() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 120, 1).await;
        let m = env.admissions.create(env.create(&alice, "sleepy", 1)).await.unwrap().machine_id;
        env.drive().await;
        let gpu = env.scalar(&format!("SELECT gpu_id FROM machine_gpus WHERE machine_id = {m}")).await;
        let t0 = now() + 5;
        steady(&env.pool, gpu, env.node_id, Some(m), t0, t0 + 300, 0.0, 40.0).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().warned, vec![m]);
        assert_eq!(reclaim::pass(&env.pool, t0 + 180).await.unwrap().reclaims_queued, vec![m]);
        let task = env.scalar("SELECT MAX(id) FROM tasks WHERE kind = 'reclaim'").await;

        transitions::task::cancel(&env.pool, &root, task).await.unwrap();
        assert_eq!(task_outcome(&env.pool, task).await.0, "cancelled");
        assert_eq!(deadline(&env, m).await, None, "the warning went with it");
        // Still idle: warned afresh with a full grace period, not requeued.
        let next = reclaim::pass(&env.pool, t0 + 190).await.unwrap();
        assert!(next.reclaims_queued.is_empty(), "requeued at once: {next:?}");
        assert_eq!(next.warned, vec![m]);
        assert_eq!(deadline(&env, m).await, Some(t0 + 190 + 120));
    }
}

gantry_testkit::timed_test! {
    async fn a_warning_goes_with_a_deleted_or_lost_machine() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let mut warned = Vec::new();
        for name in ["gone", "lost"] {
            let m = env.admissions.create(env.create(&alice, name, 1)).await.unwrap().machine_id;
            env.drive().await;
            assert!(transitions::reclaim::warn(&env.pool, m, now() + 600, "idle").await.unwrap());
            warned.push(m);
        }
        let (gone, lost) = (warned[0], warned[1]);
        machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: gone, kind: TaskKind::Delete, keep_volume: false }).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, gone).await.0, "deleted");
        assert_eq!(deadline(&env, gone).await, None);
        let shown: Vec<i64> = reclaim::notices(&env.pool, &alice).await.unwrap().iter().map(|n| n.machine_id).collect();
        assert_eq!(shown, vec![lost], "the deleted machine left the banner");
        match reclaim::extend(&env.pool, &alice, gone).await {
            Err(PlatformError::Conflict(why)) => assert!(why.contains("is deleted"), "{why}"),
            other => panic!("a deleted machine was extended: {other:?}"),
        }

        transitions::node::mark_lost(&env.pool, None, env.node_id, "test").await.unwrap();
        assert_eq!(deadline(&env, lost).await, None);
        assert!(reclaim::notices(&env.pool, &alice).await.unwrap().is_empty());
        let flag: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM machines m WHERE m.group_id = ? AND ((m.reclaim_deadline IS NOT NULL AND m.state IN ('running', 'stopped')) OR m.state = 'reclaimed'))",
        )
        .bind(alice.group_id)
        .fetch_one(&env.pool)
        .await
        .unwrap();
        assert!(!flag, "no notice flag for the group");
        // A row an older version left warned: the banner and extend ignore it.
        sqlx::query("UPDATE machines SET reclaim_deadline = 1 WHERE id = ?").bind(lost).execute(&env.pool).await.unwrap();
        assert!(reclaim::notices(&env.pool, &alice).await.unwrap().is_empty());
        assert!(matches!(reclaim::extend(&env.pool, &alice, lost).await, Err(PlatformError::Conflict(_))));
    }
}

gantry_testkit::timed_test! {
    async fn a_failed_reclaim_waits_before_it_is_tried_again() {
        let env = engine::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 0, 0).await;
        let m = env.admissions.create(env.create(&alice, "sleepy", 1)).await.unwrap().machine_id;
        env.drive().await;
        let gpu = env.scalar(&format!("SELECT gpu_id FROM machine_gpus WHERE machine_id = {m}")).await;
        let t0 = now() + 5;
        steady(&env.pool, gpu, env.node_id, Some(m), t0, t0 + 600, 0.0, 40.0).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().warned, vec![m]);
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().reclaims_queued, vec![m]);
        sim.fail_next("commit_container", ExecError::Failed("disk full".into()));
        env.drive().await;

        // Three passes, a minute apart: the first pushes the deadline back.
        for at in [t0 + 70, t0 + 130, t0 + 190] {
            let r = reclaim::pass(&env.pool, at).await.unwrap();
            assert!(r.reclaims_queued.is_empty(), "queued again at {at}: {r:?}");
            env.drive().await;
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE kind = 'reclaim'").await, 1);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE kind = 'reclaim' AND state = 'failed'").await, 1);
        let retry_at = t0 + 70 + gantry_core::reclaim::RETRY_MIN_SECS;
        assert_eq!(deadline(&env, m).await, Some(retry_at), "no grace period: the shortest wait");
        let (kind, detail) = events(&env.pool, m).await.pop().unwrap();
        assert_eq!(kind, "reclaim_warning", "a new deadline, shown as a warning");
        // The engine's own words go to the log; the owner reads a plain reason.
        assert!(detail.contains("engine refused") && !detail.contains("disk full") && detail.contains("tried again in 5 min"), "{detail}");
        untouched(&env, &sim, m).await;

        // At the new deadline it is tried again, and this time it works.
        assert_eq!(reclaim::pass(&env.pool, retry_at).await.unwrap().reclaims_queued, vec![m]);
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
        env.assert_quota_consistent().await;
    }
}
