//! The body of an upload on its way into both stores. Its chunks are
//! gathered into batches of about 1 MiB (the chunks themselves, shared, not
//! copied into one buffer), each handed at once to three workers — one writer per
//! store and one hasher (SHA-256, the figure users see; CRC-64, what the
//! read-back of each copy is checked against) — through short bounded
//! queues: receiving, hashing and both writes overlap on different cores,
//! a slow store slows the sender (TCP backpressure), and memory stays at a
//! few batches whatever the file's size.

use super::{
    error::{CENTRAL, REGION},
    placing::Streamed,
    store::{self, TempWriter},
    upload::Upload,
    DatasetError,
};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use std::io;
use tokio::{sync::mpsc, task::JoinHandle};

/// Bytes gathered before they are handed on: one blocking (vectored) write
/// per batch and store, few enough to keep the per-write overhead negligible.
const BATCH: usize = 1 << 20;

/// Chunks gathered at most before they are handed on (the kernel's limit
/// of pieces per vectored write).
const MAX_PIECES: usize = 1024;

/// Batches queued to each worker; with one being written and one being
/// filled, an upload holds at most about `IN_FLIGHT + 2` MiB.
const IN_FLIGHT: usize = 4;

/// What a request's body brought: the bytes both stores now hold (from the
/// start of the file) and the hashes of what this request sent.
pub(super) struct Received {
    pub size: u64,
    pub hashes: Streamed,
}

/// Writes `body` into both temporary objects from `offset`.
pub(super) async fn stream_into<S>(upload: &Upload, offset: u64, mut body: S) -> Result<Received, DatasetError>
where
    S: Stream<Item = io::Result<Bytes>> + Unpin + Send,
{
    let [central, region] = &upload.stores;
    let a = central.put_temp(&upload.temp, offset).await.map_err(|e| write_failed(upload, 0, e))?;
    let b = region.put_temp(&upload.temp, offset).await.map_err(|e| write_failed(upload, 1, e))?;
    let mut pipes = Pipes::start([a, b]);
    let mut size = offset;
    let mut batch = Batch::default();
    let stop = loop {
        let Ok(next) = tokio::time::timeout(upload.body_idle, body.next()).await else {
            let idle = io::Error::new(io::ErrorKind::TimedOut, format!("no bytes arrived for {} s", upload.body_idle.as_secs()));
            break Some(Stop::Body(idle));
        };
        match next {
            Some(Ok(chunk)) => {
                size += chunk.len() as u64;
                if size > upload.max_bytes {
                    break Some(Stop::TooBig);
                }
                batch.push(chunk);
                if batch.full() && !pipes.send(batch.take()).await {
                    break Some(Stop::StoreFailed);
                }
            }
            Some(Err(e)) => break Some(Stop::Body(e)),
            None => break None,
        }
    };
    match stop {
        None => {
            let sent = batch.chunks.is_empty() || pipes.send(batch.take()).await;
            let (writers, hashes) = pipes.close().await;
            let [a, b] = written(upload, writers)?;
            if !sent {
                return Err(DatasetError::Store("hashing the upload failed; nothing was kept".into()));
            }
            let (ra, rb) = tokio::join!(a.finish(), b.finish());
            ra.map_err(|e| write_failed(upload, 0, e))?;
            rb.map_err(|e| write_failed(upload, 1, e))?;
            Ok(Received { size, hashes })
        }
        Some(Stop::TooBig) => {
            pipes.close().await;
            Err(too_big(upload))
        }
        Some(Stop::StoreFailed) => {
            let (writers, _) = pipes.close().await;
            written(upload, writers)?;
            Err(DatasetError::Store("a store stopped taking the upload; nothing was kept".into()))
        }
        Some(Stop::Body(e)) => {
            // Keep what was sent so far when the upload can resume.
            if upload.resumable {
                let _ = batch.chunks.is_empty() || pipes.send(batch.take()).await;
                let (writers, _) = pipes.close().await;
                if let Ok([a, b]) = written(upload, writers) {
                    if let (Ok(()), Ok(())) = tokio::join!(a.finish(), b.finish()) {
                        return Err(DatasetError::Incomplete(format!("the upload stopped after {size} bytes ({e}); resume from there")));
                    }
                }
            } else {
                pipes.close().await;
            }
            Err(DatasetError::Incomplete(format!("the upload stopped after {size} bytes ({e}); nothing was kept")))
        }
    }
}

enum Stop {
    TooBig,
    StoreFailed,
    Body(io::Error),
}

/// Chunks received and not yet handed on.
#[derive(Default)]
struct Batch {
    chunks: Vec<Bytes>,
    bytes: usize,
}

impl Batch {
    /// A megabyte, or as many pieces as one `writev` takes: a client
    /// sending tiny chunks gets small batches, not a huge list of pieces.
    fn full(&self) -> bool {
        self.bytes >= BATCH || self.chunks.len() >= MAX_PIECES
    }
    fn push(&mut self, chunk: Bytes) {
        self.bytes += chunk.len();
        self.chunks.push(chunk);
    }
    fn take(&mut self) -> Vec<Bytes> {
        self.bytes = 0;
        std::mem::take(&mut self.chunks)
    }
}

type Written = io::Result<Box<dyn TempWriter>>;

/// The three workers of one request.
struct Pipes {
    writers: Vec<(mpsc::Sender<Vec<Bytes>>, JoinHandle<Written>)>,
    hasher: (mpsc::Sender<Vec<Bytes>>, JoinHandle<Streamed>),
}

impl Pipes {
    fn start(stores: [Box<dyn TempWriter>; 2]) -> Pipes {
        let writers = stores
            .into_iter()
            .map(|mut w| {
                let (tx, mut rx) = mpsc::channel::<Vec<Bytes>>(IN_FLIGHT);
                let task = tokio::spawn(async move {
                    while let Some(chunks) = rx.recv().await {
                        w.write(chunks).await?;
                    }
                    Ok(w)
                });
                (tx, task)
            })
            .collect();
        let (tx, mut rx) = mpsc::channel::<Vec<Bytes>>(IN_FLIGHT);
        // Hashing is CPU work: on a blocking thread, beside the writers.
        let task = tokio::task::spawn_blocking(move || {
            let (mut sha, mut crc) = (Sha256::new(), store::crc64());
            while let Some(chunks) = rx.blocking_recv() {
                for chunk in &chunks {
                    sha.update(chunk);
                    crc.update(chunk);
                }
            }
            Streamed { sha256: store::hex(&sha.finalize()), crc64: store::crc64_hex(&crc) }
        });
        Pipes { writers, hasher: (tx, task) }
    }

    /// Hands a batch to every worker, waiting while their queues are full;
    /// false when a writer has stopped (its error comes from `close`).
    async fn send(&mut self, chunks: Vec<Bytes>) -> bool {
        let (w0, w1) = (&self.writers[0].0, &self.writers[1].0);
        let (a, b, h) = tokio::join!(w0.send(chunks.clone()), w1.send(chunks.clone()), self.hasher.0.send(chunks));
        a.is_ok() && b.is_ok() && h.is_ok()
    }

    /// Ends the queues and waits for every worker: nothing writes into a
    /// store after this returns.
    async fn close(self) -> (Vec<Result<Written, tokio::task::JoinError>>, Streamed) {
        let Pipes { writers, hasher } = self;
        let mut results = Vec::with_capacity(2);
        for (tx, task) in writers {
            drop(tx);
            results.push(task.await);
        }
        drop(hasher.0);
        let hashes = hasher.1.await.unwrap_or(Streamed { sha256: String::new(), crc64: String::new() });
        (results, hashes)
    }
}

/// Both writers back, or the first store's error as the user should read it.
fn written(upload: &Upload, results: Vec<Result<Written, tokio::task::JoinError>>) -> Result<[Box<dyn TempWriter>; 2], DatasetError> {
    let mut out = Vec::with_capacity(2);
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(Ok(w)) => out.push(w),
            Ok(Err(e)) => return Err(write_failed(upload, i, e)),
            Err(e) => return Err(write_failed(upload, i, io::Error::other(e.to_string()))),
        }
    }
    out.try_into().map_err(|_| DatasetError::Store("an upload lost a writer".into()))
}

/// A failed write: to the central store nothing was kept; to the region's,
/// the central copy goes too (the caller discards both).
fn write_failed(upload: &Upload, which: usize, e: io::Error) -> DatasetError {
    let detail = format!("{}: {e}", upload.stores[which].describe());
    if which == 0 {
        DatasetError::store(format!("writing to {CENTRAL} failed; nothing was kept"), detail)
    } else {
        DatasetError::store(format!("writing to {REGION} failed; the copy in {CENTRAL} was removed"), detail)
    }
}

fn too_big(upload: &Upload) -> DatasetError {
    match upload.total {
        Some(total) if upload.max_bytes == total => DatasetError::BadRequest(format!("the body is longer than the declared {total} bytes")),
        _ => DatasetError::TooLarge { limit: upload.max_bytes },
    }
}
