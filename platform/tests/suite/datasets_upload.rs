//! The dataset upload on directory stores: both copies equal the client's
//! checksum, a cut or refused upload leaves nothing (no file, no temporary
//! file, no row), traversal names are refused, a failing second store
//! removes the first copy, a resumable upload continues from its offset,
//! quota and sealing refuse and change nothing, deleting a version removes
//! its files from both stores, and the start-up clean-up.

use crate::datasets_support;

use bytes::Bytes;
use datasets_support::*;
use futures_util::StreamExt;
use gantry_platform::datasets::{
    self,
    store::{ByteStream, TempWriter},
    BeginUpload, DatasetError, UploadState,
};
use std::{io, sync::Arc};

fn done(state: UploadState) -> datasets::FileView {
    match state {
        UploadState::Done(f) => f,
        other => panic!("expected a finished upload, got {other:?}"),
    }
}

gantry_testkit::timed_test! {
    async fn both_copies_match_the_clients_checksum_at_the_category_path() {
        let env = env().await;
        let data = random_bytes(3 * 1024 * 1024 + 17);
        let file = done(env.put("train/cat 1.jpg", &data).await.unwrap());
        assert_eq!(file.sha256, sha(&data));
        assert_eq!(file.size as usize, data.len());
        for root in [env.central_root.clone(), env.region_dir()] {
            let stored = std::fs::read(root.join("coco/v1/images/train/cat 1.jpg")).unwrap();
            assert_eq!(sha(&stored), sha(&data), "{}", root.display());
            assert_eq!(files_under(&root), vec!["coco/v1/images/train/cat 1.jpg".to_string()], "no temporary file left in {}", root.display());
        }
        let (_, _, files) = datasets::files(&env.pool, &env.alice, "coco", "v1").await.unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_body_of_tiny_chunks_is_stored_whole_and_in_order() {
        // Chunks are handed to the stores as they came (vectored writes of
        // at most 1,024 pieces): 3,076 chunks of 7 bytes (the last of 5)
        // fill three batches by count and leave a partial fourth.
        let env = env().await;
        let data = random_bytes(3 * 1025 * 7 + 5);
        let begin = BeginUpload { code: "coco", version: "v1", name: "tiny.bin", replace: false, total: Some(data.len() as u64), resumable: false };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let file = done(datasets::write_upload(&env.pool, &upload, 0, body(data.clone(), 7), None).await.unwrap());
        assert_eq!(file.sha256, sha(&data));
        for root in [env.central_root.clone(), env.region_dir()] {
            assert_eq!(std::fs::read(root.join("coco/v1/images/tiny.bin")).unwrap(), data, "{}", root.display());
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_second_request_cannot_write_an_upload_another_request_is_writing() {
        let env = env().await;
        let data = random_bytes(300_000);
        let begin = BeginUpload { code: "coco", version: "v1", name: "both.bin", replace: false, total: Some(data.len() as u64), resumable: true };
        // The first request has sent 100,000 bytes and is still sending.
        let first = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let (tx, rx) = live_body();
        tx.send(Ok(Bytes::copy_from_slice(&data[..100_000]))).unwrap();
        let pool = env.pool.clone();
        let writing = tokio::spawn(async move { datasets::write_upload(&pool, &first, 0, rx, None).await });
        wait_until_written_by_someone(&env, "both.bin").await;

        // A second request of the same owner — a client retrying too soon —
        // is refused before it touches the temporary files.
        let second = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let err = datasets::write_upload(&env.pool, &second, second.offset, body(data.clone(), 64 * 1024), None).await.unwrap_err();
        assert!(matches!(err, DatasetError::Busy(_)), "{err:?}");
        assert_eq!(err.status(), 409);
        assert!(err.to_string().contains("another request is writing this upload"), "{err}");

        // The first request's connection breaks: its bytes are kept and the
        // upload is free at once; the client continues from the offset.
        tx.send(Err(io::Error::new(io::ErrorKind::ConnectionReset, "reset"))).unwrap();
        let cut = writing.await.unwrap().unwrap_err();
        assert!(matches!(cut, DatasetError::Incomplete(_)), "{cut:?}");
        let third = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert_eq!(third.offset, 100_000);
        let file = done(datasets::write_upload(&env.pool, &third, 100_000, body(data[100_000..].to_vec(), 64 * 1024), None).await.unwrap());
        assert_eq!(file.sha256, sha(&data), "the file is exactly what the client sent, in order");
    }
}

gantry_testkit::timed_test! {
    async fn a_body_that_stops_sending_is_cut_and_frees_the_upload() {
        let env = env().await;
        let data = random_bytes(200_000);
        let begin = BeginUpload { code: "coco", version: "v1", name: "idle.bin", replace: false, total: Some(data.len() as u64), resumable: true };
        let mut upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        upload.body_idle = std::time::Duration::from_millis(300);
        // 50,000 bytes, then nothing: a connection that died without a word.
        let (tx, rx) = live_body();
        tx.send(Ok(Bytes::copy_from_slice(&data[..50_000]))).unwrap();
        // The bound only tells "never cut" from a slow machine.
        let err = tokio::time::timeout(std::time::Duration::from_secs(60), datasets::write_upload(&env.pool, &upload, 0, rx, None))
            .await
            .expect("a body that stopped sending was never cut")
            .unwrap_err();
        assert!(matches!(err, DatasetError::Incomplete(_)), "{err:?}");
        assert!(err.to_string().contains("no bytes arrived"), "{err}");
        drop(tx);
        // Kept as far as it got, and nobody holds it any more.
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads WHERE writer IS NOT NULL").await, 0);
        let next = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert_eq!(next.offset, 50_000);
        let file = done(datasets::write_upload(&env.pool, &next, 50_000, body(data[50_000..].to_vec(), 64 * 1024), None).await.unwrap());
        assert_eq!(file.sha256, sha(&data));
    }
}

gantry_testkit::timed_test! {
    async fn a_writer_lease_left_by_a_dead_process_lets_the_next_request_in_once_it_expires() {
        let env = env().await;
        let data = random_bytes(100_000);
        let begin = BeginUpload { code: "coco", version: "v1", name: "orphan.bin", replace: false, total: Some(data.len() as u64), resumable: true };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        // A process holding the lease died between two renewals: while its
        // lease runs, the upload is refused and nothing is written.
        let lease = |expires: i64| {
            sqlx::query("UPDATE dataset_uploads SET writer = 'a-dead-process', writer_expires = ? WHERE id = ?").bind(expires).bind(upload.id)
        };
        lease(gantry_platform::now() + datasets::writing::LEASE_SECS).execute(&env.pool).await.unwrap();
        let err = datasets::write_upload(&env.pool, &upload, 0, body(data.clone(), 64 * 1024), None).await.unwrap_err();
        assert!(matches!(err, DatasetError::Busy(_)), "{err:?}");
        assert!(files_under(&env.central_root).is_empty(), "{:?}", files_under(&env.central_root));
        // Once it has expired, the next request takes the upload over.
        lease(gantry_platform::now() - 1).execute(&env.pool).await.unwrap();
        let file = done(datasets::write_upload(&env.pool, &upload, 0, body(data.clone(), 64 * 1024), None).await.unwrap());
        assert_eq!(file.sha256, sha(&data));
    }
}

/// A body the test feeds as it goes: what is sent arrives; nothing more
/// arrives until the sender sends again or is dropped (the body ends).
fn live_body() -> (
    tokio::sync::mpsc::UnboundedSender<io::Result<Bytes>>,
    impl futures_util::Stream<Item = io::Result<Bytes>> + Unpin + Send,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (tx, Box::pin(futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })))
}

/// Waits (bounded) until some request holds the writer lease of `name`'s
/// upload: the first request's claim is the event the test waits for.
async fn wait_until_written_by_someone(env: &Env, name: &str) {
    for _ in 0..2000 {
        let held: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM dataset_uploads WHERE name = ? AND writer IS NOT NULL")
                .bind(name)
                .fetch_optional(&env.pool)
                .await
                .unwrap();
        if held.is_some() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the first request never took the upload");
}

gantry_testkit::timed_test! {
    async fn a_cut_upload_leaves_no_file_no_temporary_file_and_no_row() {
        let env = env().await;
        let data = random_bytes(2 * 1024 * 1024);
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.bin", replace: false, total: Some(data.len() as u64), resumable: false };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let err = datasets::write_upload(&env.pool, &upload, 0, cut_body(&data, 1_500_000), None).await.unwrap_err();
        assert!(matches!(err, DatasetError::Incomplete(_)), "{err:?}");
        assert!(err.to_string().contains("nothing was kept"), "{err}");
        assert!(files_under(&env.central_root).is_empty(), "{:?}", files_under(&env.central_root));
        assert!(files_under(&env.region_dir()).is_empty());
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        // A body shorter than its declared length is cut too.
        let err = env_put_short(&env, &data).await;
        assert!(err.to_string().contains("ended after"), "{err}");
        assert!(files_under(&env.central_root).is_empty());
    }
}

async fn env_put_short(env: &Env, data: &[u8]) -> DatasetError {
    let begin = BeginUpload {
        code: "coco",
        version: "v1",
        name: "b.bin",
        replace: false,
        total: Some(data.len() as u64 + 10),
        resumable: false,
    };
    let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
    datasets::write_upload(&env.pool, &upload, 0, body(data.to_vec(), 4096), None).await.unwrap_err()
}

gantry_testkit::timed_test! {
    async fn traversal_and_other_bad_names_are_refused_before_anything_is_written() {
        let env = env().await;
        for bad in ["../x", "/etc/passwd", "a/../../b", "a\\..\\b", "new\nline", "", "a//b", "./a"] {
            let err = env.put(bad, b"x").await.unwrap_err();
            assert_eq!(err.status(), 400, "{bad:?}: {err}");
        }
        assert!(files_under(&env.dir.path().join("central")).is_empty());
        assert!(!env.dir.path().join("x").exists() && !env.region_root.exists() || files_under(&env.region_root).is_empty());
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

/// A region store that fails ("failing test store"); a test makes it
/// fail while writing or when placing, or hand back rotten reads. It
/// tells no local directory, like an object store: every read-back and
/// copy goes through its (hooked) calls.
fn failing_store(root: &std::path::Path) -> Arc<Hooked> {
    Arc::new(Hooked::new("failing test store", root).without_local_dir())
}

/// Reads hand back the stored bytes with one bit flipped: a copy that
/// rotted between the write and the read-back.
fn rotting_reads<'a>(get: Call<'a, ByteStream>) -> Call<'a, ByteStream> {
    Box::pin(async move {
        let mut first = true;
        let stream = get.await?.map(move |chunk| {
            chunk.map(|c| {
                let mut v = c.to_vec();
                if std::mem::take(&mut first) && !v.is_empty() {
                    v[0] ^= 1;
                }
                Bytes::from(v)
            })
        });
        Ok(Box::pin(stream) as ByteStream)
    })
}

gantry_testkit::timed_test! {
    async fn a_second_store_failing_removes_the_first_copy_and_says_why() {
        for (fail_after, fail_rename) in [(Some(2 * 1024 * 1024), false), (None, true)] {
            let scratch = tempfile::tempdir().unwrap();
            let failing = failing_store(scratch.path());
            if let Some(left) = fail_after {
                failing.on_put_temp.set(move |put| {
                    Box::pin(async move { Ok(Box::new(FailingWriter { inner: put.await?, left }) as Box<dyn TempWriter>) })
                });
            }
            if fail_rename {
                failing.on_rename.fail("rename refused");
            }
            let env = env_with(None, Some(failing)).await;
            let data = random_bytes(5 * 1024 * 1024);
            let err = env.put("a.bin", &data).await.unwrap_err();
            assert_eq!(err.status(), 502, "{err}");
            let text = err.to_string();
            // The store is named by its role; what it is and what it said go to the log.
            assert!(text.contains("the region's store") && (text.contains("was removed") || text.contains("nothing was kept")), "{text}");
            assert!(!text.contains("failing test store") && !text.contains("disk on fire") && !text.contains("rename refused"), "{text}");
            assert!(files_under(&env.central_root).is_empty(), "central copy left: {:?}", files_under(&env.central_root));
            assert!(files_under(scratch.path()).is_empty(), "region copy left: {:?}", files_under(scratch.path()));
            assert_eq!(env.count("SELECT COUNT(*) FROM dataset_files").await, 0);
            assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_copy_that_reads_back_different_from_what_was_received_is_not_listed() {
        let scratch = tempfile::tempdir().unwrap();
        let rotten = failing_store(scratch.path());
        rotten.on_get.set(rotting_reads);
        let env = env_with(None, Some(rotten)).await;
        let err = env.put("a.bin", &random_bytes(3 * 1024 * 1024 + 17)).await.unwrap_err();
        assert_eq!(err.status(), 422, "{err}");
        assert!(err.to_string().contains("the two copies differ") && err.to_string().contains("nothing was kept"), "{err}");
        assert!(files_under(&env.central_root).is_empty() && files_under(scratch.path()).is_empty());
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_resumable_upload_continues_from_its_offset_after_a_cut() {
        let env = env().await;
        let data = random_bytes(6 * 1024 * 1024 + 5);
        let total = data.len() as u64;
        let begin = BeginUpload { code: "coco", version: "v1", name: "big.bin", replace: false, total: Some(total), resumable: true };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert_eq!(upload.offset, 0);
        let err = datasets::write_upload(&env.pool, &upload, 0, cut_body(&data, 2_500_000), None).await.unwrap_err();
        assert!(matches!(err, DatasetError::Incomplete(_)), "{err:?}");
        // Nothing visible, but the server holds what arrived.
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        let (held, declared) = datasets::upload_status(&env.pool, &env.stores, &env.alice, "coco", "v1", "big.bin").await.unwrap();
        assert_eq!((held, declared), (2_500_000, total));
        // Someone else cannot take the name meanwhile; a wrong offset is refused.
        let other = BeginUpload { code: "coco", version: "v1", name: "big.bin", replace: false, total: Some(total), resumable: false };
        assert_eq!(datasets::begin_upload(&env.pool, &env.stores, &env.alice, &other).await.unwrap_err().status(), 409);
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert_eq!(upload.offset, held);
        let wrong = datasets::write_upload(&env.pool, &upload, 0, body(data.clone(), 65536), None).await.unwrap_err();
        assert!(wrong.to_string().contains("holds 2500000 bytes"), "{wrong}");
        // The rest, in two requests.
        let mid = 4_000_000usize;
        let state = datasets::write_upload(&env.pool, &upload, held, body(data[held as usize..mid].to_vec(), 65536), None).await.unwrap();
        assert!(matches!(state, UploadState::Partial { offset: 4_000_000, .. }), "{state:?}");
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let file = done(datasets::write_upload(&env.pool, &upload, mid as u64, body(data[mid..].to_vec(), 65536), Some(&sha(&data))).await.unwrap());
        assert_eq!(file.sha256, sha(&data));
        for root in [env.central_root.clone(), env.region_dir()] {
            assert_eq!(sha(&std::fs::read(root.join("coco/v1/images/big.bin")).unwrap()), sha(&data));
            assert_eq!(files_under(&root).len(), 1, "{:?}", files_under(&root));
        }
    }
}

gantry_testkit::timed_test! {
    async fn duplicates_quota_and_sealed_versions_are_refused_and_change_nothing() {
        let env = env().await;
        done(env.put("a.txt", b"first").await.unwrap());
        let err = env.put("a.txt", b"second").await.unwrap_err();
        assert_eq!(err.status(), 409);
        assert!(err.to_string().contains("choose replace"), "{err}");
        // Replace is allowed when asked for.
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(6), resumable: false };
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        done(datasets::write_upload(&env.pool, &up, 0, body(b"second".to_vec(), 2), None).await.unwrap());
        assert_eq!(std::fs::read(env.central_root.join("coco/v1/images/a.txt")).unwrap(), b"second");
        // Quota: 10 bytes for group ml, 6 held.
        let admin = gantry_platform::accounts::create_user(
            &env.pool,
            None,
            gantry_platform::accounts::NewUser { username: "root", password: "a-good-password", role: gantry_core::Role::Admin, group: None },
        )
        .await
        .unwrap();
        datasets::set_quota(&env.pool, &admin, "ml", 10).await.unwrap();
        let err = env.put("b.txt", b"12345").await.unwrap_err();
        assert_eq!(err.status(), 413);
        assert_eq!(err.to_string(), "group ml holds 6 B of its 10 B dataset quota; this file needs 5 B more");
        // Unknown length: stopped when the quota runs out.
        let begin = BeginUpload { code: "coco", version: "v1", name: "c.txt", replace: false, total: None, resumable: false };
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let err = datasets::write_upload(&env.pool, &up, 0, body(b"123456789".to_vec(), 3), None).await.unwrap_err();
        assert_eq!(err.status(), 413, "{err}");
        assert_eq!(files_under(&env.central_root), vec!["coco/v1/images/a.txt".to_string()]);
        // Another group may not write, and does not even see a private dataset.
        assert_eq!(datasets::begin_upload(&env.pool, &env.stores, &env.carol, &BeginUpload { name: "x", ..begin }).await.unwrap_err().status(), 404);
        // Sealed: read-only.
        datasets::seal_version(&env.pool, &env.alice, "coco", "v1").await.unwrap();
        let err = env.put("d.txt", b"1").await.unwrap_err();
        assert_eq!(err.status(), 409);
        assert!(err.to_string().contains("sealed"), "{err}");
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_files").await, 1);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn deleting_a_version_removes_its_files_from_both_stores() {
        let env = env().await;
        done(env.put("a.txt", b"hello").await.unwrap());
        done(env.put("sub/b.txt", b"world").await.unwrap());
        assert_eq!(datasets::delete_version(&env.pool, &env.stores, &env.carol, "coco", "v1").await.unwrap_err().status(), 404);
        datasets::delete_version(&env.pool, &env.stores, &env.alice, "coco", "v1").await.unwrap();
        assert!(files_under(&env.central_root).is_empty());
        assert!(files_under(&env.region_dir()).is_empty());
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_versions").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn temporary_files_without_a_live_upload_are_removed_at_start() {
        let env = env().await;
        let data = random_bytes(300_000);
        // A resumable upload (kept) and a one-request upload a crash left behind.
        let keep = BeginUpload { code: "coco", version: "v1", name: "keep.bin", replace: false, total: Some(data.len() as u64), resumable: true };
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &keep).await.unwrap();
        let _ = datasets::write_upload(&env.pool, &up, 0, cut_body(&data, 100_000), None).await;
        let lost = BeginUpload { code: "coco", version: "v1", name: "lost.bin", replace: false, total: None, resumable: false };
        let lost = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &lost).await.unwrap();
        let mut w = env.stores.central().unwrap().put_temp(&lost.temp, 0).await.unwrap();
        w.write(vec![Bytes::from_static(b"half")]).await.unwrap();
        w.finish().await.unwrap();
        std::fs::write(env.central_root.join(".gantry-tmp/stray"), b"x").unwrap();
        assert_eq!(files_under(&env.central_root.join(".gantry-tmp")).len(), 3);
        // Another server sharing the database is receiving a one-request
        // upload now (its writer's lease is held): not this start's to end.
        let busy = BeginUpload { code: "coco", version: "v1", name: "busy.bin", replace: false, total: None, resumable: false };
        let busy = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &busy).await.unwrap();
        let mut w = env.stores.central().unwrap().put_temp(&busy.temp, 0).await.unwrap();
        w.write(vec![Bytes::from_static(b"arriving")]).await.unwrap();
        w.finish().await.unwrap();
        sqlx::query("UPDATE dataset_uploads SET writer = 'other-server', writer_expires = ? WHERE name = 'busy.bin'")
            .bind(gantry_platform::now() + 60)
            .execute(&env.pool)
            .await
            .unwrap();
        let removed = datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();
        assert_eq!(removed, 2);
        let mut kept = vec![up.temp.clone(), busy.temp.clone()];
        kept.sort();
        assert_eq!(files_under(&env.central_root.join(".gantry-tmp")), kept);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 2);
        // Its lease lapsed (that server died): the next look removes it.
        sqlx::query("UPDATE dataset_uploads SET writer_expires = 0 WHERE name = 'busy.bin'").execute(&env.pool).await.unwrap();
        assert_eq!(datasets::clean_at_start(&env.pool, &env.stores).await.unwrap(), 1);
        assert_eq!(files_under(&env.central_root.join(".gantry-tmp")), vec![up.temp.clone()]);

        // The look again a minute after start: a one-request upload this
        // server began since it started, whose writer has not taken it
        // yet, is its own — not a dead process's.
        let started = gantry_platform::now() - 65;
        let fresh = BeginUpload { code: "coco", version: "v1", name: "fresh.bin", replace: false, total: None, resumable: false };
        let fresh = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &fresh).await.unwrap();
        datasets::clean_after_start(&env.pool, &env.stores, started).await.unwrap();
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads WHERE name = 'fresh.bin'").await, 1, "its row is kept");
        // One from before the start is a dead process's.
        sqlx::query("UPDATE dataset_uploads SET touched_at = ? WHERE id = ?").bind(started - 1).bind(fresh.id).execute(&env.pool).await.unwrap();
        datasets::clean_after_start(&env.pool, &env.stores, started).await.unwrap();
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads WHERE name = 'fresh.bin'").await, 0);
    }
}
