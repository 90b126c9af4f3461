//! Idle reclaim's races on the simulated engine: a reclaim resumed after
//! its container was removed still finishes (the image was already made),
//! and an extension or exemption committed while a pass runs stops the
//! reclaim that pass was about to queue.

use crate::{common, reclaim_common};

use gantry_platform::{
    dispatch,
    executor::{Executor, SimulatedExecutor},
    now, reclaim, transitions,
};
use reclaim_common::*;
use std::sync::Arc;

gantry_testkit::timed_test! {
    async fn a_reclaim_resumed_after_removing_the_container_finishes() {
        let env = common::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "sleepy", 1)).await.unwrap().machine_id;
        env.drive().await;
        let t = now();
        assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
        let task = transitions::reclaim::queue(&env.pool, m, t, "idle reclaim").await.unwrap().expect("queued");

        // A process that dies once the container is gone, before returning the GPUs.
        let mut dying = env.dispatcher.clone();
        dying.owner = dispatch::new_owner_id();
        dying.hook = Some(Arc::new(|_, step| step == "returning the GPUs"));
        for claimed in dispatch::claim(&env.pool, &dying.owner, 16).await.unwrap() {
            dying.execute(claimed).await;
        }
        assert!(sim.containers().is_empty(), "the container was removed before the crash");
        assert_eq!(task_outcome(&env.pool, task).await.0, "running");

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
        let env = common::env("simulated", 2, 2).await;
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
        assert_eq!(transitions::reclaim::queue(&env.pool, a, t, "idle").await.unwrap(), None, "extended");
        reclaim::set_machine_exempt(&env.pool, &root, b, true).await.unwrap();
        assert_eq!(transitions::reclaim::queue(&env.pool, b, t, "idle").await.unwrap(), None, "machine exempt");
        reclaim::set_machine_exempt(&env.pool, &root, b, false).await.unwrap();
        reclaim::set_group_exempt(&env.pool, &root, alice.group_id, true).await.unwrap();
        assert_eq!(transitions::reclaim::queue(&env.pool, b, t, "idle").await.unwrap(), None, "group exempt");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM snapshots").await, 0, "nothing written");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE kind = 'reclaim'").await, 0);

        // Nothing in the way: it is queued.
        reclaim::set_group_exempt(&env.pool, &root, alice.group_id, false).await.unwrap();
        assert!(transitions::reclaim::queue(&env.pool, b, t, "idle").await.unwrap().is_some());
    }
}

gantry_testkit::timed_test! {
    async fn a_snapshot_a_restore_is_under_way_from_cannot_be_deleted() {
        let env = common::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "napper", 1)).await.unwrap().machine_id;
        env.drive().await;
        let t = now();
        assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
        transitions::reclaim::queue(&env.pool, m, t, "idle reclaim").await.unwrap().expect("queued");
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
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
