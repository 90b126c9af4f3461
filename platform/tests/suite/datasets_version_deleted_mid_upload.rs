//! A version deleted while one of its uploads is still receiving its body:
//! the upload stops at the writer lease's next renewal (the rest of the body
//! is never waited for) and says why, and it ends the same way, not as a
//! store failure, when the body ends before that renewal comes.

use crate::datasets_support;

use bytes::Bytes;
use datasets_support::*;
use futures_util::{stream, Stream};
use gantry_platform::datasets::{self, BeginUpload, DatasetError, UploadState};
use std::{io, sync::Arc};
use tokio::sync::{mpsc, oneshot};

const MIB: usize = 1 << 20;

/// A request body the test feeds chunk by chunk; `reading` fires when the
/// upload first asks it for bytes (it holds the upload's writer lease then).
fn fed_body(
) -> (mpsc::Sender<io::Result<Bytes>>, impl Stream<Item = io::Result<Bytes>> + Unpin + Send, oneshot::Receiver<()>) {
    let (tx, rx) = mpsc::channel(4);
    let (began, reading) = oneshot::channel();
    let body = stream::unfold((rx, Some(began)), |(mut rx, mut began)| async move {
        if let Some(began) = began.take() {
            let _ = began.send(());
        }
        rx.recv().await.map(|chunk| (chunk, (rx, began)))
    });
    (tx, Box::pin(body), reading)
}

/// Begins a 2 MiB upload of `big.bin` and starts writing it; its first
/// MiB is sent and the writer is reading its body when this returns.
async fn writing_big(
    env: &Arc<Env>,
) -> (mpsc::Sender<io::Result<Bytes>>, tokio::task::JoinHandle<Result<UploadState, DatasetError>>) {
    let begin = BeginUpload {
        code: "coco",
        version: "v1",
        name: "big.bin",
        replace: false,
        total: Some(2 * MIB as u64),
        resumable: false,
    };
    let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
    let (tx, body, reading) = fed_body();
    let writer = tokio::spawn({
        let env = env.clone();
        async move { datasets::write_upload(&env.pool, &upload, 0, body, None).await }
    });
    reading.await.unwrap();
    tx.send(Ok(Bytes::from(vec![7u8; MIB]))).await.unwrap();
    (tx, writer)
}

fn assert_left_nothing(env: &Env, refused: &DatasetError) {
    assert_eq!(refused.status(), 409, "{refused}");
    assert_eq!(refused.to_string(), "version v1 of coco was deleted while big.bin was uploading; nothing was kept");
    assert_eq!(files_under(&env.central_root), Vec::<String>::new());
    assert_eq!(files_under(&env.region_dir()), Vec::<String>::new());
}

gantry_testkit::timed_test! {
    async fn deleting_the_version_stops_an_upload_whose_body_is_still_coming() {
        let env = Arc::new(env().await);
        let (body, writer) = writing_big(&env).await;
        datasets::delete_version(&env.pool, &env.stores, &env.alice, "coco", "v1").await.unwrap();

        // The second MiB never comes and the body stays open: the upload
        // ends by itself, saying why.
        let refused = writer.await.unwrap().unwrap_err();
        assert_left_nothing(&env, &refused);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
        drop(body);
    }
}

gantry_testkit::timed_test! {
    async fn a_body_ending_just_after_its_version_was_deleted_is_told_so_not_a_store_failure() {
        let env = Arc::new(env().await);
        let (body, writer) = writing_big(&env).await;
        datasets::delete_version(&env.pool, &env.stores, &env.alice, "coco", "v1").await.unwrap();
        body.send(Ok(Bytes::from(vec![8u8; MIB]))).await.unwrap();
        drop(body);

        let refused = writer.await.unwrap().unwrap_err();
        assert_left_nothing(&env, &refused);
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}
