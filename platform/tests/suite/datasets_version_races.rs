//! Uploads racing what happens beside them: a version deleted while a
//! replace moves its copies into place leaves nothing of either file; a
//! client hanging up, or the process dying, between the two moves leaves
//! (or, at the next start, puts) both stores back in step with the listing;
//! and a server starting up never removes an upload another server begins
//! meanwhile. The region's store here runs a
//! step of the other party at the exact moment the race needs.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::datasets::{self, BeginUpload, UploadState};
use std::sync::Arc;

/// The env on a region store ("racing test store") whose next rename into
/// place or next listing a test makes run its step first.
async fn with_racing_region() -> (tempfile::TempDir, Arc<Hooked>, Arc<Env>) {
    let scratch = tempfile::tempdir().unwrap();
    let region = Arc::new(Hooked::new("racing test store", scratch.path()));
    let env = Arc::new(env_with(None, Some(region.clone())).await);
    (scratch, region, env)
}

gantry_testkit::timed_test! {
    async fn a_version_deleted_while_a_replace_moves_into_place_keeps_nothing_of_either_file() {
        let (scratch, region, env) = with_racing_region().await;
        assert!(matches!(env.put("a.txt", b"the old file").await.unwrap(), UploadState::Done(_)));

        // The version is deleted (the real call, by its owner) just as the
        // region's copy of the replacement moves into place.
        let deleting = env.clone();
        region.on_rename.once(move |rename| {
            Box::pin(async move {
                datasets::delete_version(&deleting.pool, &deleting.stores, &deleting.alice, "coco", "v1").await.unwrap();
                rename.await
            })
        });
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(12), resumable: false };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let refused = datasets::write_upload(&env.pool, &upload, 0, body(b"the new file".to_vec(), 4), None).await.unwrap_err();
        assert!(refused.to_string().contains("its version was deleted meanwhile"), "{refused}");

        // Nothing is put back under the deleted version, and nothing kept aside stays.
        for root in [env.central_root.clone(), scratch.path().to_path_buf()] {
            assert_eq!(files_under(&root), Vec::<String>::new(), "left in {}", root.display());
        }
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_files").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_start_up_clean_keeps_an_upload_another_server_begins_meanwhile() {
        let (_scratch, region, env) = with_racing_region().await;

        // While the starting server lists the region's temporary objects,
        // another server begins a resumable upload and receives its first half.
        let data = random_bytes(256 * 1024);
        let other = env.clone();
        let first_half = data[..128 * 1024].to_vec();
        region.on_list.once(move |list| {
            Box::pin(async move {
                let begin = BeginUpload { code: "coco", version: "v1", name: "big.bin", replace: false, total: Some(256 * 1024), resumable: true };
                let upload = datasets::begin_upload(&other.pool, &other.stores, &other.alice, &begin).await.unwrap();
                let state = datasets::write_upload(&other.pool, &upload, 0, body(first_half, 64 * 1024), None).await.unwrap();
                assert!(matches!(state, UploadState::Partial { offset: 131072, .. }), "{state:?}");
                list.await
            })
        });
        datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();

        // The upload goes on from where it stopped and ends whole.
        let (held, _) = datasets::upload_status(&env.pool, &env.stores, &env.alice, "coco", "v1", "big.bin").await.unwrap();
        assert_eq!(held, 128 * 1024, "the other server's bytes were kept");
        let begin = BeginUpload { code: "coco", version: "v1", name: "big.bin", replace: false, total: Some(256 * 1024), resumable: true };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let done = datasets::write_upload(&env.pool, &upload, held, body(data[128 * 1024..].to_vec(), 64 * 1024), None).await.unwrap();
        let UploadState::Done(file) = done else { panic!("not done: {done:?}") };
        assert_eq!(file.sha256, sha(&data));
    }
}

gantry_testkit::timed_test! {
    async fn a_client_hanging_up_while_a_replace_moves_into_place_leaves_both_stores_alike() {
        let (scratch, region, env) = with_racing_region().await;
        assert!(matches!(env.put("a.txt", b"the old file").await.unwrap(), UploadState::Done(_)));

        // The region's move into place waits; the central copy has moved.
        let Gate { entered: at_rename, go, .. } = region.on_rename.gate_once();
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(12), resumable: false };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let request = tokio::spawn({
            let (env, upload) = (env.clone(), upload.clone());
            async move { datasets::write_upload(&env.pool, &upload, 0, body(b"the new file".to_vec(), 4), None).await }
        });
        at_rename.await.unwrap();
        // The browser hangs up: its request future is dropped, and the
        // form route's guard abandons the upload, as it does.
        request.abort();
        let _ = request.await;
        // Placing still holds the writer's lease: no resumed request and no
        // starting server may take the upload while it moves the copies.
        let held = env.count(&format!("SELECT COUNT(*) FROM dataset_uploads WHERE id = {} AND writer IS NOT NULL", upload.id)).await;
        assert_eq!(held, 1, "the lease went with the request");
        datasets::abandon_upload(&env.pool, &upload).await;
        let _ = go.send(()); // (the old code dropped placing with the request: nobody waits)

        // Placing ends its own way (the file kept aside is put back); then
        // both stores hold what is listed.
        let aside_left = || files_under(&env.central_root).iter().chain(files_under(scratch.path()).iter()).any(|f| f.ends_with(".old"));
        for _ in 0..1000 {
            if !aside_left() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!aside_left(), "the replace never finished: a file kept aside is still there: {:?}", files_under(scratch.path()));
        let (_, listed) = datasets::file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.unwrap();
        for root in [env.central_root.clone(), scratch.path().to_path_buf()] {
            let held = std::fs::read(root.join("coco/v1/images/a.txt")).unwrap();
            assert_eq!(sha(&held), listed.sha256, "{} holds what is listed", root.display());
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_replace_that_died_between_its_two_moves_is_undone_at_the_next_start() {
        let (scratch, region, env) = with_racing_region().await;
        assert!(matches!(env.put("a.txt", b"the old file").await.unwrap(), UploadState::Done(_)));

        // The process dies (here: its placing task panics) after the central
        // copy moved into place and before the region's did.
        region.on_rename.once(|_| Box::pin(async { panic!("the process dies here") }));
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(12), resumable: false };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert!(datasets::write_upload(&env.pool, &upload, 0, body(b"the new file".to_vec(), 4), None).await.is_err());
        assert_eq!(std::fs::read(env.central_root.join("coco/v1/images/a.txt")).unwrap(), b"the new file", "the crash point: central moved");
        // A dead process's writer lease lapses before the next start looks.
        // (Here the panic's unwinding releases it, on a task of its own
        // that may not have run yet — the put-back then skipped a row that
        // still looked leased, now and then.)
        sqlx::query("UPDATE dataset_uploads SET writer_expires = 0").execute(&env.pool).await.unwrap();

        // The next start puts the listed file back where it was moved away.
        datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();
        let (_, listed) = datasets::file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.unwrap();
        assert_eq!(listed.sha256, sha(b"the old file"));
        for root in [env.central_root.clone(), scratch.path().to_path_buf()] {
            assert_eq!(files_under(&root), vec!["coco/v1/images/a.txt".to_string()], "nothing else in {}", root.display());
            assert_eq!(std::fs::read(root.join("coco/v1/images/a.txt")).unwrap(), b"the old file", "{}", root.display());
        }
    }
}

/// A resumable replace of a.txt whose process died (its placing task
/// panics) after the central copy moved into place and before the region's
/// did: the central store holds the new, unlisted bytes.
async fn resumable_replace_died_between_its_moves(env: &Env, region: &Hooked) {
    assert!(matches!(env.put("a.txt", b"the old file").await.unwrap(), UploadState::Done(_)));
    region.on_rename.once(|_| Box::pin(async { panic!("the process dies here") }));
    let begin =
        BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(12), resumable: true };
    let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
    assert!(datasets::write_upload(&env.pool, &upload, 0, body(b"the new file".to_vec(), 4), None).await.is_err());
    assert_eq!(
        std::fs::read(env.central_root.join("coco/v1/images/a.txt")).unwrap(),
        b"the new file",
        "the crash point: central moved"
    );
    // A dead process's writer lease lapses (see the test above).
    sqlx::query("UPDATE dataset_uploads SET writer_expires = 0").execute(&env.pool).await.unwrap();
}

/// Both stores hold the listed old file, and nothing is kept aside.
async fn both_stores_hold_the_old_file(env: &Env, region_root: &std::path::Path) {
    let (_, listed) = datasets::file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.unwrap();
    assert_eq!(listed.sha256, sha(b"the old file"));
    for root in [env.central_root.clone(), region_root.to_path_buf()] {
        let held = String::from_utf8(std::fs::read(root.join("coco/v1/images/a.txt")).unwrap()).unwrap();
        assert_eq!(held, "the old file", "{}", root.display());
        let aside: Vec<String> = files_under(&root).into_iter().filter(|f| f.ends_with(".old")).collect();
        assert_eq!(aside, Vec::<String>::new(), "kept aside in {}", root.display());
    }
}

gantry_testkit::timed_test! {
    async fn a_resumable_replace_that_died_between_its_two_moves_is_undone_at_the_next_start() {
        let (scratch, region, env) = with_racing_region().await;
        resumable_replace_died_between_its_moves(&env, &region).await;

        // The upload has not expired, yet the next start puts the listed
        // file back: until then downloads would get the unlisted bytes.
        datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();
        both_stores_hold_the_old_file(&env, scratch.path()).await;

        // The upload is still there to resume, from what both stores hold,
        // and ends as a replace should.
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(12), resumable: true };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let rest = b"the new file"[upload.offset as usize..].to_vec();
        let done = datasets::write_upload(&env.pool, &upload, upload.offset, body(rest, 4), None).await.unwrap();
        assert!(matches!(done, UploadState::Done(ref f) if f.sha256 == sha(b"the new file")), "{done:?}");
        for root in [env.central_root.clone(), scratch.path().to_path_buf()] {
            assert_eq!(files_under(&root), vec!["coco/v1/images/a.txt".to_string()], "nothing else in {}", root.display());
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_cancelled_resumable_replace_that_died_between_its_two_moves_keeps_the_listed_file() {
        let (scratch, region, env) = with_racing_region().await;
        resumable_replace_died_between_its_moves(&env, &region).await;

        // Cancelled before any start looked: the cancel puts the listed
        // file back, and the start after it finds nothing to undo.
        datasets::cancel_upload(&env.pool, &env.stores, &env.alice, "coco", "v1", "a.txt").await.unwrap();
        datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();
        both_stores_hold_the_old_file(&env, scratch.path()).await;
        for root in [env.central_root.clone(), scratch.path().to_path_buf()] {
            assert_eq!(files_under(&root), vec!["coco/v1/images/a.txt".to_string()], "nothing else in {}", root.display());
        }
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_resumed_replace_whose_earlier_placing_died_keeps_the_listed_file_when_it_fails_again() {
        let (scratch, region, env) = with_racing_region().await;
        resumable_replace_died_between_its_moves(&env, &region).await;

        // Resumed before any start looked, and its placing fails in the
        // region's store: what is put back must be the listed file, not
        // what the earlier placing had moved into the central store.
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(12), resumable: true };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        region.on_rename.once(|_| Box::pin(async { Err(std::io::Error::other("the region's store fails")) }));
        let rest = b"the new file"[upload.offset as usize..].to_vec();
        let failed = datasets::write_upload(&env.pool, &upload, upload.offset, body(rest, 4), None).await.unwrap_err();
        assert!(failed.to_string().contains("the listed file was kept as it was"), "{failed}");
        both_stores_hold_the_old_file(&env, scratch.path()).await;
    }
}
