//! Snapshots on the real local Docker Engine: taken from a running machine,
//! a new machine (and a reinstall) from it finds the files written before;
//! the group's snapshot quota; delete refused while a machine is made
//! from it, then the image removed; another group's snapshots are not found.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_core::task::TaskKind;
use gantry_platform::{machines, snapshots, PlatformError};
use reclaim_common::*;

async fn delete_machine(env: &engine::Env, who: &gantry_platform::accounts::User, id: i64) {
    let t = machines::request_operation(
        &env.pool,
        who,
        machines::OperationRequest { machine_id: id, kind: TaskKind::Delete, keep_volume: false },
    )
    .await
    .unwrap();
    env.drive().await;
    assert_eq!(task_outcome(&env.pool, t).await.0, "succeeded");
}

gantry_testkit::timed_test! {
    async fn snapshot_then_new_machine_and_reinstall_from_it() {
        let env = engine::docker_env(4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let ex = env.executor().await;
        let made = env.admissions.create(env.create(&alice, "source", 1)).await.unwrap();
        env.drive().await;
        let c = env.text(&format!("SELECT container_id FROM machines WHERE id = {}", made.machine_id)).await;
        ex.exec(&c, &["sh", "-c", "echo from-before > /tmp/marker.txt"]).await.unwrap();

        // Bad names are refused and nothing is written.
        let bad = snapshots::request(&env.pool, &alice, made.machine_id, "  ").await.unwrap_err();
        assert!(matches!(bad, PlatformError::BadRequest(_)), "{bad:?}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM snapshots").await, 0);

        let (snap_id, task) = snapshots::request(&env.pool, &alice, made.machine_id, "with marker").await.unwrap();
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "succeeded", "{message}");
        let snap = snapshots::get(&env.pool, &alice, snap_id).await.unwrap();
        assert_eq!((snap.state.as_str(), snap.name.as_str(), snap.machine_name.as_str(), snap.origin.as_str()), ("ready", "with marker", "source", "user"));
        assert!(snap.size_bytes > 0, "size recorded");
        assert_eq!(machine_state(&env.pool, made.machine_id).await.0, "running", "a snapshot leaves the machine running");

        // A new machine from it has the file (a new, empty data volume).
        let mut req = env.create(&alice, "copy", 1);
        req.volume_size_gb = 1;
        let copy = snapshots::create_machine(&env.pool, req, snap_id).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, copy.machine_id).await.0, "running");
        let c2 = env.text(&format!("SELECT container_id FROM machines WHERE id = {}", copy.machine_id)).await;
        assert_eq!(ex.exec(&c2, &["cat", "/tmp/marker.txt"]).await.unwrap().1, "from-before\n");
        assert_eq!(env.scalar(&format!("SELECT from_snapshot_id FROM machines WHERE id = {}", copy.machine_id)).await, snap_id);
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2, "quota deducted as for any create");

        // A snapshot of the copy records its parent.
        let (child, _) = snapshots::request(&env.pool, &alice, copy.machine_id, "child").await.unwrap();
        env.drive().await;
        assert_eq!(snapshots::get(&env.pool, &alice, child).await.unwrap().parent_id, Some(snap_id));

        // Reinstall the source from the snapshot after breaking its file.
        ex.exec(&c, &["sh", "-c", "rm /tmp/marker.txt; echo vol > /data/v.txt"]).await.unwrap();
        let t = snapshots::reinstall_from(&env.pool, &alice, made.machine_id, snap_id).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, t).await.0, "succeeded");
        let c3 = env.text(&format!("SELECT container_id FROM machines WHERE id = {}", made.machine_id)).await;
        assert_eq!(ex.exec(&c3, &["cat", "/tmp/marker.txt", "/data/v.txt"]).await.unwrap().1, "from-before\nvol\n");

        // The group's quota of snapshots (reclaim snapshots aside).
        sqlx::query("UPDATE groups SET snapshot_quota = 2 WHERE name = 'ml-team'").execute(&env.pool).await.unwrap();
        let over = snapshots::request(&env.pool, &alice, made.machine_id, "third").await.unwrap_err().to_string();
        assert_eq!(over, "the group keeps 2 of its 2 snapshot(s); delete one first");

        // Another group sees nothing and touches nothing.
        gantry_platform::accounts::create_group(&env.pool, None, "other", 4).await.unwrap();
        let bob = env.user("bob", "other").await;
        assert!(snapshots::list(&env.pool, &bob).await.unwrap().is_empty());
        assert!(matches!(snapshots::get(&env.pool, &bob, snap_id).await, Err(PlatformError::NotFound(_))));
        assert!(matches!(snapshots::delete(&env.pool, &env.dispatcher.fleet, &bob, snap_id).await, Err(PlatformError::NotFound(_))));
        assert!(matches!(snapshots::create_machine(&env.pool, env.create(&bob, "stolen", 1), snap_id).await, Err(PlatformError::NotFound(_))));
        assert!(matches!(snapshots::request(&env.pool, &bob, made.machine_id, "x").await, Err(PlatformError::NotFound(_))));

        // The image of live machines: refused, naming them, and nothing changes.
        let refused = snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snap_id).await.unwrap_err().to_string();
        assert!(refused.contains("machine copy, machine source"), "{refused}");
        assert_eq!(snapshots::get(&env.pool, &alice, snap_id).await.unwrap().state, gantry_core::snapshot::SnapshotState::Ready);
        assert!(ex.image_info(&snap.image_ref).await.unwrap().is_some());
        assert_eq!(snapshots::list(&env.pool, &alice).await.unwrap().len(), 2);

        delete_machine(&env, &alice, copy.machine_id).await;
        delete_machine(&env, &alice, made.machine_id).await;
        let child_ref = snapshots::get(&env.pool, &alice, child).await.unwrap().image_ref;
        snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, child).await.unwrap();
        snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snap_id).await.unwrap();
        assert!(ex.image_info(&snap.image_ref).await.unwrap().is_none() && ex.image_info(&child_ref).await.unwrap().is_none());
        assert!(snapshots::list(&env.pool, &alice).await.unwrap().is_empty());
        env.assert_quota_consistent().await;
    }
}
