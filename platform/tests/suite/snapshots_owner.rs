//! A snapshot holds its machine's files outside /data (keys, tokens, shell
//! history), which group members may not reach: they cannot enter the
//! machine or take its kept volume. So only its owner (or an admin) makes
//! a machine from it or reinstalls from it; before, any member of the
//! group could, and read the owner's files in their own machine.

use crate::reclaim_common::task_outcome;
use crate::reclaim_snapshots::{counts, running, sim_env};

use gantry_platform::{snapshots, PlatformError};

gantry_testkit::timed_test! {
    async fn only_its_owner_or_an_admin_makes_a_machine_from_a_snapshot_or_reinstalls_from_it() {
        let (env, _sim, alice) = sim_env().await;
        let bob = env.user("bob", "ml-team").await;
        let root = crate::reclaim_common::admin(&env.pool).await;
        let hers = running(&env, &alice, "hers").await;
        let his = running(&env, &bob, "his").await;
        let (snap, _) = snapshots::request(&env.pool, &alice, hers, "with-keys").await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snap}")).await, "ready");
        let before = counts(&env).await;

        let refused = snapshots::create_machine(&env.pool, env.create(&bob, "peek", 1), snap).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("snapshot with-keys is another member's")), "{refused:?}");
        let refused = snapshots::reinstall_from(&env.pool, &bob, his, snap).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("only they (or an admin)")), "{refused:?}");
        assert_eq!(counts(&env).await, before, "nothing changed");
        // He sees it listed, as not his.
        let listed = snapshots::list(&env.pool, &bob).await.unwrap();
        assert!(listed.iter().any(|s| s.id == snap && s.owner == "alice" && s.owner_id == alice.id), "{listed:?}");

        // Its owner and an admin may.
        let copy = snapshots::create_machine(&env.pool, env.create(&alice, "copy", 1), snap).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", copy.machine_id)).await, "running");
        let task = snapshots::reinstall_from(&env.pool, &root, his, snap).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_machine_from_a_snapshot_keeps_its_machines_cpu_and_memory() {
        let (env, _sim, alice) = sim_env().await;
        // A group held to 1 CPU and 1 GB per machine: the defaults (2 CPUs,
        // 4 GB) a machine from a snapshot used to get were always refused.
        sqlx::query("UPDATE groups SET max_cpus_per_machine = 1, max_memory_gb_per_machine = 1 WHERE name = 'ml-team'").execute(&env.pool).await.unwrap();
        let mut small = env.create(&alice, "small", 1);
        (small.cpu_millis, small.memory_mb) = (Some(1000), Some(1024));
        let m = env.admissions.create(small).await.unwrap().machine_id;
        env.drive().await;
        let (snap, _) = snapshots::request(&env.pool, &alice, m, "small-snap").await.unwrap();
        env.drive().await;

        let copy = snapshots::create_machine(&env.pool, gantry_platform::machines::CreateMachine::new(alice.clone(), "small-copy", 1, 1), snap).await.unwrap();
        let sized = env.text(&format!("SELECT cpu_millis || ' ' || memory_mb FROM machines WHERE id = {}", copy.machine_id)).await;
        assert_eq!(sized, "1000 1024");
    }
}
