//! A delete that keeps the volume and gives up on an engine that does not
//! answer lists the volume at once, while the old container — fenced off
//! with its GPUs until the collector has seen it gone — may still run on
//! it. Before, a new machine could be made on that volume meanwhile, and
//! the two shared it; now that waits for the collector.

use gantry_core::task::TaskKind;
use gantry_platform::{
    executor::{Executor, SimulatedExecutor},
    machines::{self, OperationRequest},
    reconcile, PlatformError,
};
use gantry_testkit::engine::env;

gantry_testkit::timed_test! {
    async fn a_kept_volume_whose_old_container_may_still_run_is_not_taken_until_collected() {
        let env = env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let old = env.admissions.create(env.create(&alice, "old", 1)).await.unwrap().machine_id;
        env.drive().await;
        sim.set_available(false);
        let task = machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: old, kind: TaskKind::Delete, keep_volume: true }).await.unwrap();
        env.drive().await;
        sqlx::query("UPDATE tasks SET attempts = 5, not_before = 0 WHERE id = ?").bind(task).execute(&env.pool).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {old}")).await, "deleted");
        let kept = machines::list_kept_volumes(&env.pool, &alice).await.unwrap();
        assert_eq!(kept.len(), 1, "listed at once");
        assert!(env.scalar("SELECT COUNT(*) FROM gpus_left_to_collector").await > 0);

        // The engine answers again, but the collector has not passed yet.
        sim.set_available(true);
        let mut again = env.create(&alice, "again", 1);
        again.kept_volume_id = Some(kept[0].id);
        let refused = env.admissions.create(again.clone()).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Refused(why) if why.contains("may still be in use by the container")), "{refused:?}");
        assert_eq!(machines::list_kept_volumes(&env.pool, &alice).await.unwrap().len(), 1, "still kept");

        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar("SELECT COUNT(*) FROM gpus_left_to_collector").await, 0);
        env.admissions.create(again).await.unwrap();
        env.assert_quota_consistent().await;
    }
}
