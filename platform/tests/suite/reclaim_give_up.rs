//! A reclaim whose engine stops answering after it made the image (its
//! runner died once the container was removed, and every later try finds
//! the engine silent) ends `reclaimed` when it gives up: the image is the
//! restore point, and the GPUs wait for the collector. Before, it failed
//! its snapshot and left a machine without a container that could not be
//! restored — only reinstalled, losing everything outside /data.

use crate::reclaim_common;

use gantry_platform::{reclaim, reconcile};
use reclaim_common::*;

gantry_testkit::timed_test! {
    async fn a_reclaim_that_gives_up_after_its_image_was_made_ends_reclaimed_and_restorable() {
        // The runner died once the container was gone, before the GPUs went back.
        let (env, sim, alice, m, task) = reclaim_died_after_removing_the_container().await;
        // Then the engine is silent through the last try.
        sim.set_available(false);
        env.expire_all_leases().await;
        sqlx::query("UPDATE tasks SET attempts = 5, not_before = 0 WHERE id = ?").bind(task).execute(&env.pool).await.unwrap();
        env.drive().await;

        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "succeeded", "{message}");
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
        let snapshot = env.scalar(&format!("SELECT COALESCE(restore_snapshot_id, -1) FROM machines WHERE id = {m}")).await;
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snapshot}")).await, "ready");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "the group has its GPU back");
        env.assert_quota_consistent().await;

        // The engine answers again: the collector frees the card, and the
        // machine comes back from its image.
        sim.set_available(true);
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar("SELECT COUNT(*) FROM gpus_left_to_collector").await, 0);
        let restore = reclaim::restore(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, restore).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        env.assert_quota_consistent().await;
    }
}
