//! A snapshot on a node marked lost: its engine will never answer, so
//! deleting it forgets the row (the image stays on the dead node) and the
//! group's snapshot quota counts it no more. Before, every delete answered
//! "try again later" for good and the quota stayed taken (and the
//! reconciler's sweep, which deletes the same way, asked the dead engine
//! again for each reclaim snapshot at every pass).

use crate::reclaim_snapshots::{running, sim_env};

use gantry_platform::{snapshots, transitions};

gantry_testkit::timed_test! {
    async fn a_snapshot_on_a_lost_node_is_deleted_without_its_engine() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "doomed").await;
        let (snap, _) = snapshots::request(&env.pool, &alice, m, "before-the-fire").await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snap}")).await, "ready");
        let used = || env.scalar("SELECT COUNT(*) FROM snapshots WHERE state = 'ready' AND origin = 'user'");
        assert_eq!(used().await, 1);

        sim.set_available(false);
        transitions::node::mark_lost(&env.pool, None, env.node_id, "the host burned").await.unwrap();
        let name = snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snap).await.unwrap();
        assert_eq!(name, "before-the-fire");
        assert_eq!(used().await, 0, "the quota counts it no more");
        let audit = env.text("SELECT detail FROM audit_log WHERE action = 'snapshot.delete'").await;
        assert!(audit.contains("left on its lost node"), "{audit}");
    }
}
