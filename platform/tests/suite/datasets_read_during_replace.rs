//! A download pairs the listed row with the bytes it opens: while a
//! replace moves its copies (the central store already holds the new file,
//! the row still the old one's) the file is refused for a moment, and a
//! download that read the row before a replace began notices it after
//! opening. A replace that died while placing leaves the file refused only
//! until it is put back, at start or by the sweep.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::datasets::{self, BeginUpload, DatasetError, UploadState};
use std::sync::Arc;

const OLD: &[u8] = b"the listed file";
const NEW: &[u8] = b"the file that replaces it, longer";

async fn listed_sha(env: &Env) -> Result<String, DatasetError> {
    datasets::listed_file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.map(|l| l.file.sha256)
}

async fn begin_replace(env: &Env, resumable: bool) -> datasets::Upload {
    let begin = BeginUpload {
        code: "coco",
        version: "v1",
        name: "a.txt",
        replace: true,
        total: Some(NEW.len() as u64),
        resumable,
    };
    datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap()
}

/// The listed file `OLD` and a replace of it whose process died placing
/// it before it moved anything: the upload's row and the mark
/// `listing::reserve` writes. The file is refused meanwhile.
async fn died_placing(env: &Env, resumable: bool) -> datasets::Upload {
    assert!(matches!(env.put("a.txt", OLD).await.unwrap(), UploadState::Done(_)));
    let upload = begin_replace(env, resumable).await;
    sqlx::query("UPDATE dataset_files SET placing = 1, placings = placings + 1 WHERE name = 'a.txt'")
        .execute(&env.pool)
        .await
        .unwrap();
    assert_eq!(listed_sha(env).await.unwrap_err().status(), 503);
    upload
}

gantry_testkit::timed_test! {
    async fn a_file_is_refused_while_a_replace_moves_its_copies_and_a_read_from_before_notices() {
        let scratch = tempfile::tempdir().unwrap();
        let region = Arc::new(Hooked::new("gated test store", scratch.path()));
        let env = env_with(None, Some(region.clone())).await;
        assert!(matches!(env.put("a.txt", OLD).await.unwrap(), UploadState::Done(_)));
        let before = datasets::listed_file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.unwrap();
        assert!(before.still_listed(&env.pool).await.unwrap(), "nothing came between");

        // The region's move waits: the central store's key holds the new
        // file, the row is still the old one's.
        let gate = region.on_rename.gate_once();
        let upload = begin_replace(&env, false).await;
        let pool = env.pool.clone();
        let replace = tokio::spawn(async move { datasets::write_upload(&pool, &upload, 0, body(NEW.to_vec(), 8), None).await });
        gate.entered.await.unwrap();
        assert_eq!(std::fs::read(env.central_root.join("coco/v1/images/a.txt")).unwrap(), NEW, "the central key holds the new bytes");
        let refused = listed_sha(&env).await.unwrap_err();
        assert_eq!((refused.status(), refused.to_string()), (503, "a.txt is being replaced right now; try again in a moment".to_string()));
        assert!(!before.still_listed(&env.pool).await.unwrap(), "a download that read the row before must read it again");

        gate.go.send(()).unwrap();
        assert!(matches!(replace.await.unwrap().unwrap(), UploadState::Done(_)));
        assert!(!before.still_listed(&env.pool).await.unwrap(), "the old row is not the listed file any more");
        let after = datasets::listed_file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.unwrap();
        assert_eq!(after.file.sha256, sha(NEW));
        assert!(after.still_listed(&env.pool).await.unwrap());
    }
}

gantry_testkit::timed_test! {
    async fn a_failed_replace_leaves_the_listed_file_readable() {
        let scratch = tempfile::tempdir().unwrap();
        let region = Arc::new(Hooked::new("flaky test store", scratch.path()));
        let env = env_with(None, Some(region.clone())).await;
        assert!(matches!(env.put("a.txt", OLD).await.unwrap(), UploadState::Done(_)));
        region.on_rename.fail("rename refused");
        let upload = begin_replace(&env, false).await;
        let err = datasets::write_upload(&env.pool, &upload, 0, body(NEW.to_vec(), 8), None).await.unwrap_err();
        assert_eq!(err.status(), 502, "{err}");
        assert_eq!(listed_sha(&env).await.unwrap(), sha(OLD), "put back, and readable again");
        assert_eq!(std::fs::read(env.central_root.join("coco/v1/images/a.txt")).unwrap(), OLD);
    }
}

gantry_testkit::timed_test! {
    async fn a_replace_that_died_while_placing_is_refused_until_the_start_puts_it_back() {
        let env = env().await;
        died_placing(&env, false).await;
        datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0, "the dead process's upload ended");
        assert_eq!(listed_sha(&env).await.unwrap(), sha(OLD), "readable again");
    }
}

gantry_testkit::timed_test! {
    async fn a_resumable_replace_whose_placing_died_is_readable_after_the_sweep_and_resumes() {
        let env = env().await;
        // Its placing died before it set anything aside: the mark alone.
        let upload = died_placing(&env, true).await;
        let swept = datasets::sweep(&env.pool, &env.stores, gantry_platform::now()).await.unwrap();
        assert_eq!(swept.expired, 0, "not idle: it stays, to be resumed");
        assert_eq!(listed_sha(&env).await.unwrap(), sha(OLD), "readable again");
        let resumed = datasets::resume_upload(&env.pool, &env.stores, &env.alice, "coco", "v1", "a.txt", None).await.unwrap();
        assert_eq!(resumed.id, upload.id);
        assert!(matches!(datasets::write_upload(&env.pool, &resumed, 0, body(NEW.to_vec(), 8), None).await.unwrap(), UploadState::Done(_)));
        assert_eq!(listed_sha(&env).await.unwrap(), sha(NEW));
    }
}
