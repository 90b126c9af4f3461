//! Reclaim snapshots are their machine's restore point, not the group's
//! snapshots (the quota does not count them): no machine is made or
//! reinstalled from one, and the reconciler deletes one — row and image —
//! once its machine is deleted or a newer reclaim replaced it. A user
//! snapshot becomes a machine's image only when a reinstall from it runs.

use crate::reclaim_common::*;
use gantry_testkit::engine;

use gantry_core::task::TaskKind;
use gantry_platform::{
    accounts::User,
    executor::{ExecError, Executor, SimulatedExecutor},
    machines::{self, OperationRequest},
    now, reclaim, reconcile, snapshots, transitions, PlatformError,
};

/// Warns machine `m` with a passed deadline, queues its reclaim and runs
/// it: returns the reclaim snapshot it is now restored from.
pub(crate) async fn reclaim_now(env: &engine::Env, m: i64) -> i64 {
    let t = now();
    assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
    transitions::reclaim::queue(&env.pool, m, t, None, "idle reclaim").await.unwrap().expect("queued");
    env.drive().await;
    assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
    env.scalar(&format!("SELECT restore_snapshot_id FROM machines WHERE id = {m}")).await
}

pub(crate) async fn running(env: &engine::Env, who: &User, name: &str) -> i64 {
    let m = env.admissions.create(env.create(who, name, 1)).await.unwrap().machine_id;
    env.drive().await;
    assert_eq!(machine_state(&env.pool, m).await.0, "running");
    m
}

pub(crate) async fn sim_env() -> (engine::Env, SimulatedExecutor, User) {
    let env = engine::env("simulated", 4, 4).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    let alice = env.user("alice", "ml-team").await;
    (env, sim, alice)
}

async fn image_of(env: &engine::Env, snapshot: i64) -> String {
    env.text(&format!("SELECT image_ref FROM snapshots WHERE id = {snapshot}")).await
}

/// Rows that a refused request must leave as they were.
pub(crate) async fn counts(env: &engine::Env) -> (i64, i64, i64, String) {
    (
        env.scalar("SELECT COUNT(*) FROM machines").await,
        env.scalar("SELECT COUNT(*) FROM tasks").await,
        env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await,
        env.text("SELECT group_concat(id || ':' || state || ':' || COALESCE(image_id, '') || ':' || COALESCE(from_snapshot_id, ''), ',') FROM machines").await,
    )
}

gantry_testkit::timed_test! {
    async fn no_machine_is_made_or_reinstalled_from_a_reclaim_snapshot() {
        let (env, _sim, alice) = sim_env().await;
        let napper = running(&env, &alice, "napper").await;
        let other = running(&env, &alice, "other").await;
        let snap = reclaim_now(&env, napper).await;
        let before = counts(&env).await;

        let refused = snapshots::create_machine(&env.pool, env.create(&alice, "copy", 1), snap).await.unwrap_err();
        assert!(matches!(refused, PlatformError::Conflict(_)), "{refused:?}");
        let name = env.text(&format!("SELECT name FROM snapshots WHERE id = {snap}")).await;
        assert_eq!(
            refused.to_string(),
            format!("snapshot {name} is machine napper's restore point from an idle reclaim; restore the machine instead, or take a snapshot of it once restored")
        );
        let refused = snapshots::reinstall_from(&env.pool, &alice, other, snap).await.unwrap_err();
        assert!(refused.to_string().contains("restore point from an idle reclaim"), "{refused}");
        assert_eq!(counts(&env).await, before, "nothing changed");

        // Its own machine still comes back from it.
        let task = reclaim::restore(&env.pool, &alice, napper).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, napper).await.0, "running");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_deleted_machines_reclaim_snapshot_is_swept_with_its_image() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "napper").await;
        let snap = reclaim_now(&env, m).await;
        let image = image_of(&env, snap).await;
        assert!(sim.committed_images().contains(&image));

        // While the machine is reclaimed it comes back from it: kept.
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snap}")).await, "ready");
        assert!(sim.committed_images().contains(&image));

        let del = machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: m, kind: TaskKind::Delete, keep_volume: false }).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");

        // An engine that refuses: reported, the snapshot as it was, tried again.
        sim.fail_next("remove_image", ExecError::Failed("engine said no".into()));
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(report.not_collected.iter().any(|n| n.contains("engine said no")), "{report:?}");
        assert_eq!(env.text(&format!("SELECT state || '/' || message FROM snapshots WHERE id = {snap}")).await, "ready/");

        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(report.not_collected.is_empty(), "{report:?}");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE id = {snap}")).await, 0, "row deleted");
        assert!(!sim.committed_images().contains(&image), "image removed from the engine");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machines WHERE restore_snapshot_id = {snap} OR from_snapshot_id = {snap}")).await, 0);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_replaced_restore_point_is_swept_and_the_current_one_kept() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "napper").await;
        let first = reclaim_now(&env, m).await;
        let task = reclaim::restore(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");

        // Restored, it runs from the first snapshot's image: kept.
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {first}")).await, "ready");

        let second = reclaim_now(&env, m).await;
        assert_ne!(first, second);
        let (first_image, second_image) = (image_of(&env, first).await, image_of(&env, second).await);
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE id = {first}")).await, 0, "the replaced one went");
        assert!(!sim.committed_images().contains(&first_image));
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {second}")).await, "ready", "the restore point stays");
        assert!(sim.committed_images().contains(&second_image));

        // And the machine still comes back from it.
        let task = reclaim::restore(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_sweep_that_stopped_part_way_is_taken_up_again() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "napper").await;
        let snap = reclaim_now(&env, m).await;
        let image = image_of(&env, snap).await;
        let del = machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: m, kind: TaskKind::Delete, keep_volume: false }).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");

        // As a process that died after the mark, before the engine answered.
        sqlx::query("UPDATE snapshots SET state = 'failed', message = 'being deleted' WHERE id = ?").bind(snap).execute(&env.pool).await.unwrap();
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar("SELECT COUNT(*) FROM snapshots").await, 0);
        assert!(!sim.committed_images().contains(&image));
    }
}

/// Machine `m` reclaimed, then put in the state a reclaim leaves that
/// removed the container and gave up before its last commit: the machine
/// not reclaimed, no restore point recorded, the snapshot failed — and its
/// image the only copy of the machine's files (its container's id is still
/// recorded and its GPU still held: only the last commit clears and
/// releases them). The snapshot's id and image.
async fn reclaim_failed_after_removing_the_container(env: &engine::Env, m: i64) -> (i64, String) {
    let snap = reclaim_now(env, m).await;
    let image = image_of(env, snap).await;
    for sql in [
        format!("UPDATE machines SET state = 'running', restore_snapshot_id = NULL, container_id = 'removed-by-the-reclaim' WHERE id = {m}"),
        format!("INSERT INTO machine_gpus (gpu_id, machine_id) SELECT id, {m} FROM gpus WHERE id NOT IN (SELECT gpu_id FROM machine_gpus) LIMIT 1"),
        "UPDATE groups SET gpus_in_use = gpus_in_use + 1 WHERE name = 'ml-team'".to_string(),
        format!("UPDATE snapshots SET state = 'failed', message = 'the database was busy (gave up after 5 attempts)' WHERE id = {snap}"),
    ] {
        sqlx::query(&sql).execute(&env.pool).await.unwrap();
    }
    (snap, image)
}

gantry_testkit::timed_test! {
    async fn a_failed_reclaims_snapshot_is_kept_while_its_machine_lives() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "napper").await;
        let (snap, image) = reclaim_failed_after_removing_the_container(&env, m).await;
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE id = {snap}")).await, 1, "the row was swept");
        assert!(sim.committed_images().contains(&image), "the machine's only copy was removed from the engine");
        assert_eq!(machine_state(&env.pool, m).await.0, "failed", "the reconciler saw its container gone");
    }
}

gantry_testkit::timed_test! {
    async fn a_failed_reclaim_that_left_the_container_has_its_image_swept() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "napper").await;
        let t = now();
        assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
        transitions::reclaim::queue(&env.pool, m, t, None, "idle reclaim").await.unwrap().expect("queued");
        // Committed, then the container could not be removed: the machine
        // keeps running with its files, so the image is nobody's.
        sim.fail_next("remove_container", ExecError::Failed("device busy".into()));
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        let (snap, image): (i64, String) = sqlx::query_as("SELECT id, image_ref FROM snapshots WHERE origin = 'reclaim'").fetch_one(&env.pool).await.unwrap();
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snap}")).await, "failed");
        assert!(sim.committed_images().contains(&image), "committed before the removal failed");
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE id = {snap}")).await, 0, "a failed reclaim's image piles up on the node");
        assert!(!sim.committed_images().contains(&image));
        assert_eq!(machine_state(&env.pool, m).await.0, "running", "the machine is untouched");
    }
}

gantry_testkit::timed_test! {
    async fn a_cancelled_reinstall_from_a_snapshot_leaves_the_machines_image() {
        let (env, _sim, alice) = sim_env().await;
        let m = running(&env, &alice, "source").await;
        let (snap, taken) = snapshots::request(&env.pool, &alice, m, "base").await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, taken).await.0, "succeeded");
        let image = format!("SELECT image_id || ':' || COALESCE(from_snapshot_id, '-') FROM machines WHERE id = {m}");
        let before = env.text(&image).await;

        // Asked for and cancelled before it ran: nothing about the machine changed …
        let reinstall = snapshots::reinstall_from(&env.pool, &alice, m, snap).await.unwrap();
        transitions::task::cancel(&env.pool, &alice, reinstall).await.unwrap();
        assert_eq!(env.text(&image).await, before, "the machine took the snapshot's image without being reinstalled");
        // … so a plain reinstall makes its container from its own image,
        let plain = machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: m, kind: TaskKind::Reinstall, keep_volume: false }).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, plain).await.0, "succeeded");
        assert_eq!(env.text(&image).await, before);
        // … and nothing holds the snapshot.
        snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snap).await.unwrap();

        // A reinstall from a snapshot that runs makes it the machine's image.
        let (snap, taken) = snapshots::request(&env.pool, &alice, m, "v2").await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, taken).await.0, "succeeded");
        let reinstall = snapshots::reinstall_from(&env.pool, &alice, m, snap).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, reinstall).await.0, "succeeded");
        let reference = image_of(&env, snap).await;
        let expected = env.text(&format!("SELECT id || ':{snap}' FROM images WHERE reference = '{reference}'")).await;
        assert_eq!(env.text(&image).await, expected);
        assert!(snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snap).await.is_err(), "its container runs from it");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_machine_from_a_snapshot_follows_the_groups_image_rule() {
        use gantry_platform::{images, policy_access::{self, AccessChange}};
        let (env, _sim, alice) = sim_env().await;
        let m = running(&env, &alice, "src").await;
        let (snap, taken) = snapshots::request(&env.pool, &alice, m, "base").await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, taken).await.0, "succeeded");
        // A snapshot of a machine made from a snapshot comes from devbox too.
        let copy = snapshots::create_machine(&env.pool, env.create(&alice, "copy", 1), snap).await.unwrap().machine_id;
        env.drive().await;
        let (snap2, taken) = snapshots::request(&env.pool, &alice, copy, "base2").await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, taken).await.0, "succeeded");
        let other = images::create_image(&env.pool, None, "other", "gantry/other:1", "", false).await.unwrap();
        let group = env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await;
        policy_access::set_group_access(&env.pool, None, group, &AccessChange { images: Some(vec![other.id]), regions: None }).await.unwrap();
        assert!(env.admissions.create(env.create(&alice, "plain", 1)).await.is_err(), "devbox is no longer allowed");
        for (name, snapshot) in [("again", snap), ("again2", snap2)] {
            let got = snapshots::create_machine(&env.pool, env.create(&alice, name, 1), snapshot).await;
            assert!(matches!(got, Err(PlatformError::Refused(ref m)) if m.contains("may not use image devbox")), "{got:?}");
        }
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2, "nothing more was taken");
    }
}

gantry_testkit::timed_test! {
    async fn a_reinstall_from_a_snapshot_follows_the_groups_image_rule_unless_the_machine_comes_from_that_image() {
        use gantry_platform::{images, policy_access::{self, AccessChange}};
        let (env, _sim, alice) = sim_env().await;
        let m = running(&env, &alice, "src").await;
        let (snap, taken) = snapshots::request(&env.pool, &alice, m, "base").await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, taken).await.0, "succeeded");
        // The group may now use only `other`; a machine made from it …
        let other = images::create_image(&env.pool, None, "other", "gantry/other:1", "", false).await.unwrap();
        let group = env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await;
        policy_access::set_group_access(&env.pool, None, group, &AccessChange { images: Some(vec![other.id]), regions: None }).await.unwrap();
        let mut req = env.create(&alice, "fresh", 1);
        req.image_id = Some(other.id);
        let fresh = env.admissions.create(req).await.unwrap().machine_id;
        env.drive().await;
        let tasks = "SELECT COUNT(*) FROM tasks";
        let before = env.scalar(tasks).await;
        // … cannot take devbox's files through a reinstall from a snapshot,
        let got = snapshots::reinstall_from(&env.pool, &alice, fresh, snap).await;
        assert!(matches!(got, Err(PlatformError::Refused(ref why)) if why.contains("may not use image devbox") && why.contains("snapshot base comes from that image")), "{got:?}");
        assert_eq!(env.scalar(tasks).await, before, "nothing was asked of the engine");
        // … while the machine the snapshot came from (already on devbox) may
        // go back to it, as a plain reinstall would give it devbox again.
        let back = snapshots::reinstall_from(&env.pool, &alice, m, snap).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, back).await.0, "succeeded");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn the_snapshot_list_is_the_newest_five_hundred() {
        let (env, _sim, alice) = sim_env().await;
        let m = running(&env, &alice, "src").await;
        // Failed snapshots are kept (with why) until deleted, outside the quota.
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 501)
             INSERT INTO snapshots (name, image_ref, machine_id, machine_name, owner_id, group_id, origin, state, message, created_at)
             SELECT 's' || i, 'gone-' || i, m.id, m.name, m.owner_id, m.group_id, 'user', 'failed', 'cancelled', i FROM n, machines m WHERE m.id = ?",
        )
        .bind(m)
        .execute(&env.pool)
        .await
        .unwrap();
        let listed = snapshots::list(&env.pool, &alice).await.unwrap();
        assert_eq!(listed.len(), snapshots::LIST_MAX);
        assert_eq!((listed[0].name.as_str(), listed[snapshots::LIST_MAX - 1].name.as_str()), ("s501", "s2"), "newest first");
    }
}

gantry_testkit::timed_test! {
    async fn a_failed_reclaims_snapshot_is_kept_while_its_node_could_not_be_listed() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "napper").await;
        // This pass cannot list the node, so nothing says the machine lost
        // its container.
        let (snap, image) = reclaim_failed_after_removing_the_container(&env, m).await;
        sim.fail_next("list_managed", ExecError::Unavailable("the engine did not answer".into()));
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(report.unreachable.len(), 1, "{report:?}");
        assert_eq!(machine_state(&env.pool, m).await.0, "running", "not looked at");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE id = {snap}")).await, 1, "the row was swept");
        assert!(sim.committed_images().contains(&image), "the machine's only copy was removed from the engine");
        // The next pass sees the container gone; the snapshot stays.
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(machine_state(&env.pool, m).await.0, "failed");
        assert!(sim.committed_images().contains(&image));
    }
}

gantry_testkit::timed_test! {
    async fn a_container_paused_for_a_commit_is_not_read_as_a_failure() {
        // The list may catch a container that a snapshot's commit has paused
        // for a moment; the commit ends, and the machine is still running.
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "napper").await;
        let container = env.text(&format!("SELECT container_id FROM machines WHERE id = {m}")).await;
        let t = now();
        assert!(transitions::reclaim::warn(&env.pool, m, t + 600, "idle").await.unwrap());
        sim.simulate_pause(&container).unwrap();
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machines WHERE id = {m} AND reclaim_deadline IS NOT NULL")).await, 1, "its warning stands");
    }
}
