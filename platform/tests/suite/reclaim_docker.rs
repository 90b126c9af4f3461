//! Idle reclaim end to end on the real local Docker Engine: an idle series
//! from the telemetry sampler (pattern `idle`), a warning with its
//! deadline, a limited extension, the reclaim (snapshot committed,
//! container removed, GPUs refunded, state `reclaimed`) and the one-click
//! restore from the snapshot with the same data volume.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_platform::{executor::ContainerStatus, machines, reclaim, snapshots, PlatformError};
use reclaim_common::*;

gantry_testkit::timed_test! {
    async fn idle_machine_is_warned_extended_reclaimed_and_restored_with_its_data() {
        let env = engine::docker_env(4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 30, 1).await;
        let ex = env.executor().await;
        let made = env.admissions.create(env.create(&alice, "idle-box", 2)).await.unwrap();
        env.drive().await;
        let id = made.machine_id;
        let first = env.text(&format!("SELECT container_id FROM machines WHERE id = {id}")).await;
        let (code, _) = ex.exec(&first, &["sh", "-c", "echo volume-data > /data/keep.txt && echo layer-data > /tmp/layer.txt"]).await.unwrap();
        assert_eq!(code, 0);
        sqlx::query("UPDATE machines SET sim_pattern = 'idle' WHERE id = ?").bind(id).execute(&env.pool).await.unwrap();
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2);

        // Not watched for a whole window yet: nothing happens.
        let t0 = gantry_platform::now() + 5;
        sample_every_10s(&env.pool, t0, t0 + 30).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 30).await.unwrap().warned, Vec::<i64>::new());

        // Idle for the whole window: warned, with the deadline and an event.
        sample_every_10s(&env.pool, t0 + 40, t0 + 60).await;
        let t1 = t0 + 60;
        let r = reclaim::pass(&env.pool, t1).await.unwrap();
        assert_eq!(r.warned, vec![id]);
        let status = reclaim::status(&env.pool, &alice, id).await.unwrap();
        assert_eq!(status.deadline, Some(t1 + 30));
        let ev = events(&env.pool, id).await;
        assert_eq!(ev[0].0, "reclaim_warning");
        assert!(ev[0].1.contains("threshold 5 %") && ev[0].1.contains("30 s"), "{}", ev[0].1);
        assert_eq!(reclaim::notices(&env.pool, &alice).await.unwrap().len(), 1, "the portal banner lists it");

        // The owner extends once (60 s from the deadline); the second is refused.
        let until = reclaim::extend(&env.pool, &alice, id).await.unwrap();
        assert!(until >= t1 + 30 + 60, "{until}");
        let refused = reclaim::extend(&env.pool, &alice, id).await.unwrap_err().to_string();
        assert!(refused.contains("used 1 of 1 extension"), "{refused}");

        // Past the first deadline but not the extended one: still there.
        sample_every_10s(&env.pool, t1 + 10, t1 + 30).await;
        assert!(reclaim::pass(&env.pool, t1 + 30).await.unwrap().reclaims_queued.is_empty());
        assert_eq!(machine_state(&env.pool, id).await.0, "running");

        // Past the extended deadline, still idle: reclaimed.
        sample_every_10s(&env.pool, t1 + 40, until).await;
        assert_eq!(reclaim::pass(&env.pool, until).await.unwrap().reclaims_queued, vec![id]);
        env.drive().await;
        let (state, message) = machine_state(&env.pool, id).await;
        assert_eq!(state, "reclaimed", "{message}");
        assert!(message.contains("2 GPU(s) returned"), "{message}");
        assert_eq!(ex.inspect_container(&first).await.unwrap().status, ContainerStatus::Missing, "container removed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "quota refunded");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {id}")).await, 0);
        env.assert_quota_consistent().await;
        let snap = snapshots::list(&env.pool, &alice).await.unwrap().into_iter().find(|s| s.origin == gantry_core::snapshot::SnapshotOrigin::Reclaim).expect("reclaim snapshot");
        assert_eq!(snap.state, gantry_core::snapshot::SnapshotState::Ready);
        assert!(ex.image_info(&snap.image_ref).await.unwrap().is_some(), "image {} committed", snap.image_ref);
        assert_eq!(events(&env.pool, id).await.last().unwrap().0, "reclaimed");
        let kind = env.text(&format!("SELECT kind FROM tasks WHERE machine_id = {id} ORDER BY id DESC LIMIT 1")).await;
        assert_eq!(kind, "reclaim", "the reclaim is a task");
        // A reclaimed machine is no longer a reclaim candidate.
        assert!(reclaim::pass(&env.pool, until + 10).await.unwrap().reclaims_queued.is_empty());

        // The snapshot a reclaimed machine needs cannot be deleted.
        let refusal = snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snap.id).await.unwrap_err().to_string();
        assert!(refusal.contains("restore or delete the machine first"), "{refusal}");

        // One click: restore through the scheduling core, same volume.
        let task = reclaim::restore(&env.pool, &alice, id).await.unwrap();
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2);
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "succeeded", "{message}");
        assert_eq!(machine_state(&env.pool, id).await.0, "running");
        let second = env.text(&format!("SELECT container_id FROM machines WHERE id = {id}")).await;
        assert_ne!(second, first);
        assert_eq!(ex.exec(&second, &["cat", "/data/keep.txt"]).await.unwrap().1, "volume-data\n", "the data volume came back");
        assert_eq!(ex.exec(&second, &["cat", "/tmp/layer.txt"]).await.unwrap().1, "layer-data\n", "started from the snapshot");
        assert_eq!(events(&env.pool, id).await.last().unwrap().0, "restored");
        env.assert_quota_consistent().await;

        // Clean up: the machine, then the snapshot's image.
        let del = machines::request_operation(&env.pool, &alice, machines::OperationRequest { machine_id: id, kind: gantry_core::task::TaskKind::Delete, keep_volume: false }).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");
        snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snap.id).await.unwrap();
        assert!(ex.image_info(&snap.image_ref).await.unwrap().is_none(), "snapshot image removed");
    }
}

gantry_testkit::timed_test! {
    async fn restore_over_quota_is_refused_with_the_numbers_and_changes_nothing() {
        let env = engine::docker_env(4, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 0, 0).await;
        let made = env.admissions.create(env.create(&alice, "sleepy", 2)).await.unwrap();
        env.drive().await;
        let id = made.machine_id;
        sqlx::query("UPDATE machines SET sim_pattern = 'idle' WHERE id = ?").bind(id).execute(&env.pool).await.unwrap();
        let t0 = gantry_platform::now() + 5;
        sample_every_10s(&env.pool, t0, t0 + 60).await;
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().warned, vec![id]);
        // Grace 0: the next pass reclaims.
        assert_eq!(reclaim::pass(&env.pool, t0 + 60).await.unwrap().reclaims_queued, vec![id]);
        env.drive().await;
        assert_eq!(machine_state(&env.pool, id).await.0, "reclaimed");

        // Meanwhile someone else took the group's GPUs.
        let other = env.admissions.create(env.create(&alice, "busy", 2)).await.unwrap();
        env.drive().await;
        let err = reclaim::restore(&env.pool, &alice, id).await.unwrap_err();
        assert!(matches!(err, PlatformError::Refused(_)), "{err:?}");
        assert!(err.to_string().contains("holds 2 of 2 GPUs"), "{err}");
        assert_eq!(machine_state(&env.pool, id).await.0, "reclaimed", "nothing changed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2);
        let failed = env.text(&format!("SELECT state FROM tasks WHERE machine_id = {id} AND kind = 'restore'")).await;
        assert_eq!(failed, "failed", "the refusal is recorded as a task");

        // Another group's user cannot even see it.
        gantry_platform::accounts::create_group(&env.pool, None, "other", 4).await.unwrap();
        let bob = env.user("bob", "other").await;
        assert!(matches!(reclaim::restore(&env.pool, &bob, id).await, Err(PlatformError::NotFound(_))));
        assert!(matches!(reclaim::extend(&env.pool, &bob, id).await, Err(PlatformError::NotFound(_))));

        for m in [id, other.machine_id] {
            machines::request_operation(&env.pool, &alice, machines::OperationRequest { machine_id: m, kind: gantry_core::task::TaskKind::Delete, keep_volume: false }).await.unwrap();
        }
        env.drive().await;
        for s in snapshots::list(&env.pool, &alice).await.unwrap() {
            snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, s.id).await.unwrap();
        }
        env.assert_quota_consistent().await;
    }
}
