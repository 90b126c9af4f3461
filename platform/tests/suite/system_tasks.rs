//! Reclaim and rebalance tasks are the system's, though they name the
//! machine's owner as requester: the owner cannot cancel them (a cancelled
//! reclaim would keep an idle machine past its extensions for ever); an
//! admin can.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_platform::{
    executor::{Executor, SimulatedExecutor},
    now, transitions, PlatformError,
};
use reclaim_common::{admin, task_outcome};

gantry_testkit::timed_test! {
    async fn the_owner_cannot_cancel_a_reclaim_or_a_rebalance_but_an_admin_can() {
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        let m = env.admissions.create(env.create(&alice, "sleepy", 1)).await.unwrap().machine_id;
        env.drive().await;
        let t = now();
        assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
        let reclaim = transitions::reclaim::queue(&env.pool, m, t, None, "idle reclaim").await.unwrap().expect("queued");

        let refused = transitions::task::cancel(&env.pool, &alice, reclaim).await;
        match refused {
            Err(PlatformError::Conflict(why)) => assert!(why.contains("extend the deadline instead"), "{why}"),
            other => panic!("the owner cancelled a reclaim: {other:?}"),
        }
        assert_eq!(task_outcome(&env.pool, reclaim).await, ("scheduled".to_string(), "idle reclaim".to_string()), "unchanged");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM snapshots WHERE origin = 'reclaim' AND state = 'creating'").await, 1, "its snapshot too");
        transitions::task::cancel(&env.pool, &root, reclaim).await.unwrap();
        assert_eq!(task_outcome(&env.pool, reclaim).await.0, "cancelled");

        // A hot-GPU move to the node's other GPU.
        let free: i64 = env.scalar("SELECT id FROM gpus WHERE id NOT IN (SELECT gpu_id FROM machine_gpus)").await;
        let rebalance = transitions::rebalance::queue(&env.pool, m, &[free], "hot").await.unwrap().expect("queued");
        let refused = transitions::task::cancel(&env.pool, &alice, rebalance).await;
        assert!(matches!(&refused, Err(PlatformError::Conflict(why)) if why.contains("the system's")), "{refused:?}");
        assert_eq!(task_outcome(&env.pool, rebalance).await.0, "scheduled", "unchanged");
        transitions::task::cancel(&env.pool, &root, rebalance).await.unwrap();
        assert_eq!(task_outcome(&env.pool, rebalance).await.0, "cancelled");
        env.assert_quota_consistent().await;
    }
}
