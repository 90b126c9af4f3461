//! Uploads that race each other or a seal: a byte quota shared by uploads
//! of unknown length, a version sealed while an upload begins or after its
//! reservation vanished, a stale request holding an upload's old id.
//! Interleavings are forced step by step: a body that waits for the test,
//! a write lock held on a second connection.

use crate::datasets_support;

use bytes::Bytes;
use datasets_support::*;
use futures_util::Stream;
use gantry_platform::datasets::{self, BeginUpload, DatasetError, UploadState};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use std::{io, time::Duration};
use tokio::sync::{mpsc, oneshot};

fn unknown_length(name: &str) -> BeginUpload<'_> {
    BeginUpload { code: "coco", version: "v1", name, replace: false, total: None, resumable: false }
}

async fn set_quota(env: &Env, bytes: i64) {
    sqlx::query("INSERT INTO dataset_quotas (group_id, max_bytes) VALUES (?, ?)")
        .bind(env.alice.group_id)
        .bind(bytes)
        .execute(&env.pool)
        .await
        .unwrap();
}

gantry_testkit::timed_test! {
    async fn uploads_of_unknown_length_started_together_cannot_exceed_the_quota() {
        // No Content-Length (the no-JS form, a chunked PUT): each upload
        // reserves nothing and may bring what the quota had left at its start.
        let env = env().await;
        set_quota(&env, 100).await;
        let a = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &unknown_length("a.bin")).await.unwrap();
        let b = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &unknown_length("b.bin")).await.unwrap();
        let first = datasets::write_upload(&env.pool, &a, 0, body(random_bytes(60), 7), None).await.unwrap();
        assert!(matches!(first, UploadState::Done(_)), "{first:?}");
        let err = datasets::write_upload(&env.pool, &b, 0, body(random_bytes(60), 7), None).await.unwrap_err();
        assert_eq!(err.status(), 413, "{err}");
        assert_eq!(err.to_string(), "group ml holds 60 B of its 100 B dataset quota; this file needs 60 B more");
        for root in [env.central_root.clone(), env.region_dir()] {
            assert_eq!(files_under(&root), vec!["coco/v1/images/a.bin".to_string()], "nothing else left in {}", root.display());
        }
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
        assert_eq!(env.count("SELECT COALESCE(SUM(size), 0) FROM dataset_files").await, 60);
    }
}

/// A pool on the same file that reports each connection it gets back:
/// the test learns that a query of the code under test has completed.
async fn reporting_pool(env: &Env) -> (gantry_platform::db::Pool, mpsc::UnboundedReceiver<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let opts = SqliteConnectOptions::new()
        .filename(env.dir.path().join("gantry.db"))
        .journal_mode(SqliteJournalMode::Wal)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10));
    let pool = SqlitePoolOptions::new()
        .after_release(move |_, _| {
            let _ = tx.send(());
            Box::pin(async { Ok(true) })
        })
        .connect_with(opts)
        .await
        .unwrap();
    (pool, rx)
}

gantry_testkit::timed_test! {
    async fn a_version_sealed_while_an_upload_begins_gets_no_upload() {
        let env = env().await;
        let (pool, mut released) = reporting_pool(&env).await;
        // The write lock is held: the upload can read the version but not
        // reserve its name until the test lets go.
        let mut lock = env.pool.acquire().await.unwrap();
        sqlx::query("BEGIN IMMEDIATE").execute(&mut *lock).await.unwrap();
        let begin = tokio::spawn({
            let (stores, alice) = (env.stores.clone(), env.alice.clone());
            async move { datasets::begin_upload(&pool, &stores, &alice, &BeginUpload { total: Some(1), ..unknown_length("late.bin") }).await }
        });
        // Its two reads (the dataset, the version: not sealed) are done...
        for _ in 0..2 {
            released.recv().await.unwrap();
        }
        // ...and the version is sealed (seal_version's statement) before it
        // gets the lock.
        sqlx::query("UPDATE dataset_versions SET sealed_at = 1 WHERE name = 'v1' AND sealed_at IS NULL").execute(&mut *lock).await.unwrap();
        sqlx::query("COMMIT").execute(&mut *lock).await.unwrap();
        drop(lock);
        let err = begin.await.unwrap().unwrap_err();
        assert!(matches!(err, DatasetError::Conflict(ref m) if m.contains("sealed")), "{err:?}");
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

/// A body that tells the test when it is first asked for bytes (the
/// upload has been claimed and its temporary files opened), then waits
/// for the test's go before it brings `data` and ends.
fn gated_body(
    data: Vec<u8>,
) -> (oneshot::Receiver<()>, oneshot::Sender<()>, impl Stream<Item = io::Result<Bytes>> + Unpin + Send) {
    let (started_tx, started_rx) = oneshot::channel();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let stream = futures_util::stream::once(async move {
        let _ = started_tx.send(());
        let _ = go_rx.await;
        Ok(Bytes::from(data))
    });
    (started_rx, go_tx, Box::pin(stream))
}

gantry_testkit::timed_test! {
    async fn an_upload_whose_reservation_vanished_is_not_listed_in_a_version_sealed_meanwhile() {
        let env = env().await;
        let data = random_bytes(1000);
        let begin = BeginUpload { total: Some(1000), ..unknown_length("gone.bin") };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let (started, go, stream) = gated_body(data);
        let writing = tokio::spawn({
            let pool = env.pool.clone();
            async move { datasets::write_upload(&pool, &upload, 0, stream, None).await }
        });
        started.await.unwrap();
        // Its row goes (a stale request's delete by id), so sealing is allowed.
        sqlx::query("DELETE FROM dataset_uploads").execute(&env.pool).await.unwrap();
        datasets::seal_version(&env.pool, &env.alice, "coco", "v1").await.unwrap();
        go.send(()).unwrap();
        let err = writing.await.unwrap().unwrap_err();
        assert_eq!(err.status(), 409, "{err}");
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_files").await, 0, "nothing listed in the sealed version");
        assert!(files_under(&env.central_root).is_empty(), "{:?}", files_under(&env.central_root));
        assert!(files_under(&env.region_dir()).is_empty(), "{:?}", files_under(&env.region_dir()));
    }
}

gantry_testkit::timed_test! {
    async fn a_stale_request_cannot_touch_an_upload_that_was_given_its_old_id() {
        let env = env().await;
        let known = |name| BeginUpload { total: Some(10), ..unknown_length(name) };
        let a = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &known("a.bin")).await.unwrap();
        datasets::cancel_upload(&env.pool, &env.stores, &env.alice, "coco", "v1", "a.bin").await.unwrap();
        let b = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &known("b.bin")).await.unwrap();
        // A request still holding the cancelled upload, whose id was handed
        // on (as a table without AUTOINCREMENT does with its highest id):
        // it is refused before it writes or removes anything.
        let b_id = b.id;
        let mut stale = a;
        stale.id = b.id;
        let err = datasets::write_upload(&env.pool, &stale, 0, cut_body(&random_bytes(10), 4), None).await.unwrap_err();
        assert_eq!(err.status(), 404, "{err}");
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads WHERE name = 'b.bin'").await, 1, "the other upload keeps its row");
        let data = random_bytes(10);
        let file = datasets::write_upload(&env.pool, &b, 0, body(data.clone(), 3), None).await.unwrap();
        assert!(matches!(file, UploadState::Done(ref f) if f.sha256 == sha(&data)), "{file:?}");
        // Ids are not handed on any more.
        let c = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &known("c.bin")).await.unwrap();
        assert!(c.id > b_id, "{} after {b_id}", c.id);
    }
}

gantry_testkit::timed_test! {
    async fn cancel_is_refused_while_another_request_writes_the_upload() {
        let env = env().await;
        let data = random_bytes(100);
        let begin = BeginUpload { total: Some(100), resumable: true, ..unknown_length("r.bin") };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let cut = datasets::write_upload(&env.pool, &upload, 0, cut_body(&data, 40), None).await.unwrap_err();
        assert!(matches!(cut, DatasetError::Incomplete(_)), "{cut:?}");
        let lease = |expires: i64| sqlx::query("UPDATE dataset_uploads SET writer = 'another-request', writer_expires = ?").bind(expires);
        lease(gantry_platform::now() + datasets::writing::LEASE_SECS).execute(&env.pool).await.unwrap();
        let err = datasets::cancel_upload(&env.pool, &env.stores, &env.alice, "coco", "v1", "r.bin").await.unwrap_err();
        assert_eq!(err.status(), 409, "{err}");
        assert!(err.to_string().contains("another request is writing this upload"), "{err}");
        // Nothing was removed: the writer goes on with its bytes.
        let held = datasets::upload_status(&env.pool, &env.stores, &env.alice, "coco", "v1", "r.bin").await.unwrap();
        assert_eq!(held, (40, 100));
        // Once that request has let go (or its lease ran out), cancel works.
        lease(gantry_platform::now() - 1).execute(&env.pool).await.unwrap();
        datasets::cancel_upload(&env.pool, &env.stores, &env.alice, "coco", "v1", "r.bin").await.unwrap();
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
        assert!(files_under(&env.central_root).is_empty() && files_under(&env.region_dir()).is_empty());
    }
}
