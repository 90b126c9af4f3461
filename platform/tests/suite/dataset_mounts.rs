//! Sealed dataset versions mounted read-only into a machine on the real
//! local Docker Engine: the file is at /datasets/{code}/{version}/…, the
//! mount refuses writes, a reinstall mounts it again; unsealed, unknown
//! and other groups' versions are refused before anything is written; a
//! mounted version cannot be deleted until its machine is gone.

use crate::datasets_support::body;
use gantry_core::{datasets::parse_mounts, task::TaskKind};
use gantry_platform::{
    accounts,
    datasets::{self, mounts, store::DirStore, BeginUpload, DatasetError, Datasets, Limits, NewDataset},
    machines::{self, OperationRequest},
};
use gantry_testkit::engine;
use std::{collections::HashMap, sync::Arc};

fn stores(env: &engine::Env) -> Datasets {
    let root = env.dir.path().join("datasets");
    Datasets::new(
        Arc::new(DirStore::new(root.join("central"))),
        HashMap::new(),
        Some(root.join("regions")),
        Limits::default(),
    )
}

async fn operate(env: &engine::Env, who: &accounts::User, machine_id: i64, kind: TaskKind) {
    let task = machines::request_operation(&env.pool, who, OperationRequest { machine_id, kind, keep_volume: false })
        .await
        .unwrap();
    env.drive().await;
    let (state, message) = crate::reclaim_common::task_outcome(&env.pool, task).await;
    assert_eq!(state, "succeeded", "{kind:?}: {message}");
}

gantry_testkit::timed_test! {
    async fn a_sealed_version_is_mounted_read_only_and_kept_while_mounted() {
        let env = engine::docker_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        accounts::create_group(&env.pool, None, "other", 1).await.unwrap();
        let carol = env.user("carol", "other").await;
        let stores = stores(&env);
        let new = NewDataset { code: "coco", name: "COCO", region: "local", category: "images", description: "", visibility: "group" };
        datasets::create_dataset(&env.pool, &alice, &new).await.unwrap();
        datasets::create_version(&env.pool, &alice, "coco", "v1").await.unwrap();
        let data = b"pixels\n".to_vec();
        let begin = BeginUpload { code: "coco", version: "v1", name: "train/a.txt", replace: false, total: Some(data.len() as u64), resumable: false };
        let upload = datasets::begin_upload(&env.pool, &stores, &alice, &begin).await.unwrap();
        datasets::write_upload(&env.pool, &upload, 0, body(data, 4), None).await.unwrap();

        let refs = parse_mounts("coco/v1").unwrap();
        let err = mounts::resolve(&env.pool, &stores, &alice, &refs).await.unwrap_err();
        assert!(matches!(err, DatasetError::Conflict(ref m) if m.contains("not sealed")), "an open version is refused: {err:?}");
        datasets::seal_version(&env.pool, &alice, "coco", "v1").await.unwrap();
        let err = mounts::resolve(&env.pool, &stores, &carol, &refs).await.unwrap_err();
        assert!(matches!(err, DatasetError::NotFound(_)), "another group's private dataset does not exist for carol: {err:?}");
        let err = mounts::resolve(&env.pool, &stores, &alice, &parse_mounts("coco/v9").unwrap()).await.unwrap_err();
        assert!(matches!(err, DatasetError::NotFound(_)), "{err:?}");
        let err = mounts::resolve_named(&env.pool, Some(&stores), &alice, "coco/../v1").await.unwrap_err();
        assert!(matches!(err, DatasetError::Rule(_)), "{err:?}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, 0, "refusals write nothing");

        let resolved = mounts::resolve(&env.pool, &stores, &alice, &refs).await.unwrap();
        assert_eq!(resolved[0].target, "/datasets/coco/v1");
        let mut req = env.create(&alice, "reader", 1);
        req.datasets = resolved.clone();
        let made = env.admissions.create(req).await.unwrap();
        env.drive().await;
        let ex = env.executor().await;
        let container = format!("SELECT container_id FROM machines WHERE id = {}", made.machine_id);
        let c = env.text(&container).await;
        let file = "/datasets/coco/v1/images/train/a.txt";
        assert_eq!(ex.exec(&c, &["cat", file]).await.unwrap(), (0, "pixels\n".to_string()));
        let (code, out) = ex.exec(&c, &["sh", "-c", "echo x > /datasets/coco/v1/images/new.txt"]).await.unwrap();
        assert_ne!(code, 0, "the mount must refuse writes: {out}");
        assert!(out.contains("Read-only"), "{out}");

        // A reinstall makes a new container: the mount comes with it.
        operate(&env, &alice, made.machine_id, TaskKind::Reinstall).await;
        let c2 = env.text(&container).await;
        assert_ne!(c, c2, "a new container");
        assert_eq!(ex.exec(&c2, &["cat", file]).await.unwrap(), (0, "pixels\n".to_string()));

        let err = datasets::delete_version(&env.pool, &stores, &alice, "coco", "v1").await.unwrap_err();
        assert!(matches!(err, DatasetError::Conflict(ref m) if m.contains("machine reader")), "{err:?}");
        assert_eq!(datasets::versions(&env.pool, &alice, "coco").await.unwrap().1.len(), 1, "the version stays");

        operate(&env, &alice, made.machine_id, TaskKind::Delete).await;
        datasets::delete_version(&env.pool, &stores, &alice, "coco", "v1").await.unwrap();
        assert!(!env.dir.path().join("datasets/regions/local/coco/v1/images/train/a.txt").exists(), "files removed");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machine_datasets").await, 0, "the closed machine's mount went with the version");

        // A request checked before the version was deleted is refused at
        // admission, alone and with the reason; nothing is created.
        let machines_before = env.scalar("SELECT COUNT(*) FROM machines").await;
        let mut late = env.create(&alice, "late-reader", 1);
        late.datasets = resolved;
        let err = env.admissions.create(late).await.unwrap_err();
        assert!(err.to_string().contains("dataset version coco/v1 was deleted"), "{err}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines").await, machines_before);
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_failed_machine_that_still_holds_gpus_keeps_its_version() {
        // A restart, reinstall or rebalance that failed leaves the machine
        // `failed` with its GPUs: it accepts Restart and Reinstall, which
        // mount the version again, so the version must stay.
        let env = engine::env("simulated", 2, 2).await;
        env.use_executor(gantry_platform::executor::Executor::from(gantry_platform::executor::SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let stores = stores(&env);
        let new = NewDataset { code: "coco", name: "COCO", region: "local", category: "images", description: "", visibility: "group" };
        datasets::create_dataset(&env.pool, &alice, &new).await.unwrap();
        datasets::create_version(&env.pool, &alice, "coco", "v1").await.unwrap();
        let data = b"pixels\n".to_vec();
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: false, total: Some(data.len() as u64), resumable: false };
        let upload = datasets::begin_upload(&env.pool, &stores, &alice, &begin).await.unwrap();
        datasets::write_upload(&env.pool, &upload, 0, body(data, 4), None).await.unwrap();
        datasets::seal_version(&env.pool, &alice, "coco", "v1").await.unwrap();
        let mut req = env.create(&alice, "reader", 1);
        req.datasets = mounts::resolve(&env.pool, &stores, &alice, &parse_mounts("coco/v1").unwrap()).await.unwrap();
        let made = env.admissions.create(req).await.unwrap();
        env.drive().await;

        // What run::fail(give_back = false) leaves: failed, GPUs held.
        sqlx::query("UPDATE machines SET state = 'failed' WHERE id = ?").bind(made.machine_id).execute(&env.pool).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {}", made.machine_id)).await, 1);
        let err = datasets::delete_version(&env.pool, &stores, &alice, "coco", "v1").await.unwrap_err();
        assert!(matches!(err, DatasetError::Conflict(ref m) if m.contains("machine reader")), "{err:?}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machine_datasets").await, 1, "the mount stays");

        // It can come back: a reinstall mounts the version again.
        operate(&env, &alice, made.machine_id, TaskKind::Reinstall).await;
        assert_eq!(mounts::of_machine(&env.pool, made.machine_id).await.unwrap().len(), 1);

        // Failed with nothing held (it never starts again): no longer a user.
        sqlx::query("DELETE FROM machine_gpus WHERE machine_id = ?").bind(made.machine_id).execute(&env.pool).await.unwrap();
        sqlx::query("UPDATE machines SET state = 'failed' WHERE id = ?").bind(made.machine_id).execute(&env.pool).await.unwrap();
        sqlx::query("UPDATE groups SET gpus_in_use = 0").execute(&env.pool).await.unwrap();
        datasets::delete_version(&env.pool, &stores, &alice, "coco", "v1").await.unwrap();
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machine_datasets").await, 0);
    }
}
