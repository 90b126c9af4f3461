//! A deleted version's files are removed even when that is interrupted:
//! a store that fails, a client that hangs up, a process that dies. The
//! removal is recorded with the deletion and retried by the sweep and at
//! start; until it is done the version's name is refused, so a new
//! version under the same prefix never shows (or loses) the old files.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::{
    datasets::{self, Swept, UploadState},
    now,
};
use std::sync::Arc;

/// The region's store is [`Hooked`] ("stuck test store"): a test makes its
/// deletes fail for a while, or the next one wait at a gate.
async fn with_stuck_region() -> (tempfile::TempDir, Arc<Hooked>, Env) {
    let scratch = tempfile::tempdir().unwrap();
    let region = Arc::new(Hooked::new("stuck test store", scratch.path()));
    let env = env_with(None, Some(region.clone())).await;
    assert!(matches!(env.put("old.txt", b"a file of the deleted version").await.unwrap(), UploadState::Done(_)));
    (scratch, region, env)
}

/// The name is free again and the new version holds only its own file.
async fn v1_made_anew(env: &Env, region_root: &std::path::Path) {
    datasets::create_version(&env.pool, &env.alice, "coco", "v1").await.unwrap();
    let (_, _, listed) = datasets::files(&env.pool, &env.alice, "coco", "v1").await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    assert!(matches!(env.put("new.txt", b"a file of the new version").await.unwrap(), UploadState::Done(_)));
    for root in [env.central_root.as_path(), region_root] {
        assert_eq!(files_under(root), vec!["coco/v1/images/new.txt".to_string()], "in {}", root.display());
    }
}

fn refused_while_removing(e: datasets::DatasetError) {
    assert_eq!(e.status(), 409, "{e}");
    assert!(
        e.to_string().contains("the earlier version v1 of dataset coco are still being removed; try again shortly"),
        "{e}"
    );
}

gantry_testkit::timed_test! {
    async fn a_version_whose_files_a_store_failed_to_remove_keeps_its_name_until_the_sweep_removes_them() {
        let (scratch, region, env) = with_stuck_region().await;
        region.on_delete.fail("the store is unreachable");
        let err = datasets::delete_version(&env.pool, &env.stores, &env.alice, "coco", "v1").await.unwrap_err();
        assert_eq!(err.status(), 502, "{err}");
        assert!(err.to_string().contains("removing its files failed in the region's store; the server tries again later"), "{err}");
        assert_eq!(files_under(scratch.path()), vec!["coco/v1/images/old.txt".to_string()]);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_purges").await, 1);

        // The same name would see the old file, and be emptied by its removal.
        refused_while_removing(datasets::create_version(&env.pool, &env.alice, "coco", "v1").await.unwrap_err());
        // A sweep while the store still fails leaves the purge pending.
        assert_eq!(datasets::sweep(&env.pool, &env.stores, now()).await.unwrap(), Swept::default());
        refused_while_removing(datasets::create_version(&env.pool, &env.alice, "coco", "v1").await.unwrap_err());

        region.on_delete.clear();
        assert_eq!(datasets::sweep(&env.pool, &env.stores, now()).await.unwrap(), Swept { expired: 0, purged: 1 });
        assert_eq!(files_under(scratch.path()), Vec::<String>::new());
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_purges").await, 0);
        v1_made_anew(&env, scratch.path()).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_removal_a_dying_process_left_is_finished_at_the_next_start() {
        let (scratch, _region, env) = with_stuck_region().await;
        // The process died after its transaction deleted the version and
        // recorded the purge, while it was removing the files.
        let at = now();
        sqlx::query("DELETE FROM dataset_versions WHERE name = 'v1'").execute(&env.pool).await.unwrap();
        sqlx::query(
            "INSERT INTO dataset_purges (dataset_id, version_name, prefix, region_code, temp_keys, created_at, runner, runner_expires)
             VALUES ((SELECT id FROM datasets WHERE code = 'coco'), 'v1', 'coco/v1/', 'local', '[]', ?, 'a-dead-process', ?)",
        )
        .bind(at)
        .bind(at + 60)
        .execute(&env.pool)
        .await
        .unwrap();

        // A start within its lease leaves it (it may be another live server's).
        datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();
        assert_eq!(files_under(scratch.path()), vec!["coco/v1/images/old.txt".to_string()]);
        refused_while_removing(datasets::create_version(&env.pool, &env.alice, "coco", "v1").await.unwrap_err());

        // Once its lease has lapsed, the next look removes the files.
        sqlx::query("UPDATE dataset_purges SET runner_expires = 0").execute(&env.pool).await.unwrap();
        datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();
        for root in [env.central_root.as_path(), scratch.path()] {
            assert_eq!(files_under(root), Vec::<String>::new(), "in {}", root.display());
        }
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_purges").await, 0);
        v1_made_anew(&env, scratch.path()).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_client_hanging_up_does_not_stop_the_removal() {
        let (scratch, region, env) = with_stuck_region().await;
        let env = Arc::new(env);
        let Gate { entered: at_delete, go, done: removed } = region.on_delete.gate_once();
        let request = tokio::spawn({
            let env = env.clone();
            async move { datasets::delete_version(&env.pool, &env.stores, &env.alice, "coco", "v1").await }
        });
        // The region's copy is being removed when the client hangs up.
        at_delete.await.unwrap();
        request.abort();
        let _ = request.await;
        let _ = go.send(());
        let finished = tokio::time::timeout(std::time::Duration::from_secs(60), removed).await;
        assert!(matches!(finished, Ok(Ok(()))), "the removal stopped with the request: {finished:?}");
        assert_eq!(files_under(scratch.path()), Vec::<String>::new());
        assert_eq!(files_under(&env.central_root), Vec::<String>::new());
    }
}
