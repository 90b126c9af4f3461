//! Replacing a listed file is all or nothing too: when placing the new
//! copies or listing them fails, the listed file stays as it was — in both
//! stores, with its row — and nothing of the new one is left behind.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::datasets::{self, BeginUpload, DatasetError, UploadState};
use std::{path::Path, sync::Arc};

async fn replace(env: &Env, name: &str, data: &[u8]) -> Result<UploadState, DatasetError> {
    let begin = BeginUpload {
        code: "coco",
        version: "v1",
        name,
        replace: true,
        total: Some(data.len() as u64),
        resumable: false,
    };
    let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await?;
    datasets::write_upload(&env.pool, &upload, 0, body(data.to_vec(), 4), None).await
}

/// The listed file is `data` in both stores and in its row, and nothing else is anywhere.
async fn still_listed(env: &Env, region_root: &Path, data: &[u8]) {
    for root in [env.central_root.as_path(), region_root] {
        assert_eq!(files_under(root), vec!["coco/v1/images/a.txt".to_string()], "nothing else in {}", root.display());
        assert_eq!(std::fs::read(root.join("coco/v1/images/a.txt")).unwrap(), data, "{}", root.display());
    }
    let (_, file) = datasets::file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.unwrap();
    assert_eq!((file.size as usize, file.sha256), (data.len(), sha(data)));
    // Not left marked as being replaced: downloads read it.
    let listed = datasets::listed_file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.expect("readable");
    assert!(listed.still_listed(&env.pool).await.unwrap());
    assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
}

gantry_testkit::timed_test! {
    async fn a_replace_the_regions_store_fails_to_place_keeps_the_listed_file() {
        let scratch = tempfile::tempdir().unwrap();
        // It tells no local directory, like an object store: the listed
        // file is kept aside by a copy through the store, not a link.
        let flaky = Arc::new(Hooked::new("flaky test store", scratch.path()).without_local_dir());
        let env = env_with(None, Some(flaky.clone())).await;
        assert!(matches!(env.put("a.txt", b"the old file").await.unwrap(), UploadState::Done(_)));
        // The central copy is already in place when the region's fails.
        flaky.on_rename.fail("rename refused");
        let err = replace(&env, "a.txt", b"the new file, longer").await.unwrap_err();
        assert_eq!(err.status(), 502, "{err}");
        still_listed(&env, scratch.path(), b"the old file").await;
        assert_eq!(err.to_string(), "placing the file in the region's store failed; the listed file was kept as it was");
    }
}

gantry_testkit::timed_test! {
    async fn a_replace_that_fails_to_be_listed_keeps_the_listed_file() {
        let env = env().await;
        assert!(matches!(env.put("a.txt", b"the old file").await.unwrap(), UploadState::Done(_)));
        // Both copies are in place when the listing (its new checksum) fails.
        sqlx::query("CREATE TRIGGER refuse_listing BEFORE UPDATE OF sha256 ON dataset_files BEGIN SELECT RAISE(ABORT, 'listing refused'); END")
            .execute(&env.pool)
            .await
            .unwrap();
        let err = replace(&env, "a.txt", b"the new file, longer").await.unwrap_err();
        assert_eq!(err.status(), 500, "{err}");
        still_listed(&env, &env.region_dir(), b"the old file").await;
    }
}
