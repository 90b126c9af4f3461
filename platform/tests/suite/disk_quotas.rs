//! Issue 33, item 8 beyond the watcher: snapshots count bytes against the
//! group's snapshot storage, a node below the free-disk floor takes no new
//! machine (with the numbers), and the group's disk limits refuse values
//! out of range with nothing saved.

use crate::reclaim_snapshots::{running, sim_env};
use gantry_core::disk::{GB, MB};
use gantry_platform::{
    nodes, policy::update_group_policy_with_disk, policy_access::AccessChange, policy_disk::DiskLimits, snapshots,
    PlatformError,
};
use gantry_testkit::engine::Env;

async fn set_limits(env: &Env, disk: DiskLimits) -> Result<(), PlatformError> {
    let g = env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await;
    update_group_policy_with_disk(&env.pool, None, g, 4, 4, &[], &AccessChange::default(), None, None, &disk, None)
        .await
        .map(|_| ())
}

gantry_testkit::timed_test! {
    async fn snapshots_past_the_groups_snapshot_storage_are_refused_with_the_numbers() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "source").await;
        set_limits(&env, DiskLimits { root_disk_mb: None, snapshot_disk_mb: Some(100) }).await.unwrap();
        // 64 MiB each on the simulated engine: the first fits.
        snapshots::request(&env.pool, &alice, m, "first").await.unwrap();
        env.drive().await;
        // The machine has written 40 MB outside /data (as the disk watcher
        // read it): its next snapshot would take the group past 100 MB.
        let c = sim.containers()[0].id.clone();
        sim.set_root_disk_bytes(&c, 40 * MB);
        gantry_platform::disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let refused = snapshots::request(&env.pool, &alice, m, "second").await.unwrap_err().to_string();
        assert_eq!(refused, "the group's snapshots take 67.1 MB of its 100 MB snapshot storage, and this machine's filesystem outside /data holds 40.0 MB; delete a snapshot or files outside /data first");
        sim.set_root_disk_bytes(&c, 10 * MB);
        gantry_platform::disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        snapshots::request(&env.pool, &alice, m, "second").await.unwrap();
        env.drive().await;
        let tasks = env.scalar("SELECT COUNT(*) FROM tasks").await;
        let refused = snapshots::request(&env.pool, &alice, m, "third").await.unwrap_err().to_string();
        assert_eq!(refused, "the group's snapshots take 134.2 MB of its 100 MB snapshot storage; delete one first");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks").await, tasks, "nothing written");
        // 0: no limit.
        set_limits(&env, DiskLimits { root_disk_mb: None, snapshot_disk_mb: Some(0) }).await.unwrap();
        snapshots::request(&env.pool, &alice, m, "third").await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn a_node_below_the_disk_floor_takes_no_new_machine_and_says_why() {
        let (env, sim, alice) = sim_env().await;
        let node = env.text(&format!("SELECT name FROM nodes WHERE id = {}", env.node_id)).await;
        // Unknown free disk: no refusal.
        nodes::monitor_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        running(&env, &alice, "first").await;

        sim.set_disk_space(Some((3_200 * MB, 100 * GB)));
        nodes::monitor_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT disk_free_bytes FROM nodes WHERE id = {}", env.node_id)).await, 3_200 * MB);
        let refused = env.admissions.create(env.create(&alice, "second", 1)).await.unwrap_err().to_string();
        assert!(
            refused.contains(&format!("node {node} has 3.20 GB free, below the 10 GB floor for new machines")),
            "{refused}"
        );

        sim.set_disk_space(Some((50 * GB, 100 * GB)));
        nodes::monitor_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        running(&env, &alice, "third").await;
    }
}

gantry_testkit::timed_test! {
    async fn disk_limits_out_of_range_are_refused_and_nothing_is_saved() {
        let (env, _sim, _alice) = sim_env().await;
        let before = env.text("SELECT root_disk_mb || '/' || snapshot_disk_mb || '/' || policy_rev FROM groups WHERE name = 'ml-team'").await;
        assert_eq!(before.split('/').take(2).collect::<Vec<_>>(), ["50000", "500000"], "the defaults");
        let audit = env.scalar("SELECT COUNT(*) FROM audit_log").await;
        for bad in [
            DiskLimits { root_disk_mb: Some(-1), snapshot_disk_mb: Some(10) },
            DiskLimits { root_disk_mb: Some(10), snapshot_disk_mb: Some(i64::MAX) },
        ] {
            let e = set_limits(&env, bad).await.unwrap_err();
            assert!(matches!(e, PlatformError::BadRequest(_)), "{e:?}");
            assert!(e.to_string().contains("out of range"), "{e}");
        }
        assert_eq!(env.text("SELECT root_disk_mb || '/' || snapshot_disk_mb || '/' || policy_rev FROM groups WHERE name = 'ml-team'").await, before);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log").await, audit);

        set_limits(&env, DiskLimits { root_disk_mb: Some(20), snapshot_disk_mb: None }).await.unwrap();
        let detail = env.text("SELECT detail FROM audit_log WHERE action = 'group.update' ORDER BY id DESC LIMIT 1").await;
        assert!(detail.contains("root filesystem per machine 50 GB → 20 MB"), "{detail}");
    }
}

gantry_testkit::timed_test! {
    async fn a_compute_task_waits_with_the_numbers_while_its_node_is_below_the_disk_floor() {
        use gantry_platform::compute::{self, Command};
        let (env, sim, _root, alice) = crate::compute_sim::sim_compute_env().await;
        sim.set_disk_space(Some((GB, 100 * GB)));
        nodes::monitor_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let job = gantry_testkit::engine::compute_job("train", Command::Argv(vec!["true".into()]));
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        // The region is chosen; admission refuses the node, and the task
        // waits with the numbers instead of failing.
        assert_eq!(t.state, gantry_core::task::TaskState::Pending, "{}", t.message);
        assert!(t.message.ends_with("has 1.00 GB free, below the 10 GB floor for new machines"), "{}", t.message);
        assert_eq!(compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap(), 0);

        sim.set_disk_space(Some((50 * GB, 100 * GB)));
        nodes::monitor_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap(), 1, "placed once there is room");
    }
}

gantry_testkit::timed_test! {
    async fn a_restore_to_a_node_below_the_disk_floor_is_refused_with_the_numbers() {
        use crate::reclaim_common::{admin, machine_state, short_settings, steady};
        let (env, sim, alice) = sim_env().await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 0, 0).await;
        let m = running(&env, &alice, "napper").await;
        let gpu = env.scalar(&format!("SELECT gpu_id FROM machine_gpus WHERE machine_id = {m}")).await;
        let t0 = gantry_platform::now() + 5;
        steady(&env.pool, gpu, env.node_id, Some(m), t0, t0 + 60, 0.0, 40.0).await;
        gantry_platform::reclaim::pass(&env.pool, t0 + 60).await.unwrap();
        gantry_platform::reclaim::pass(&env.pool, t0 + 60).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");

        sim.set_disk_space(Some((2 * GB, 100 * GB)));
        nodes::monitor_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let refused = gantry_platform::reclaim::restore(&env.pool, &alice, m).await.unwrap_err().to_string();
        assert!(refused.contains("has 2.00 GB free, below the 10 GB floor for new machines (it can only run on its own node"), "{refused}");
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed", "nothing changed");
        env.assert_quota_consistent().await;

        sim.set_disk_space(Some((20 * GB, 100 * GB)));
        nodes::monitor_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        gantry_platform::reclaim::restore(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
    }
}
