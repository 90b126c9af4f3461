//! The body of an upload on its way into both stores. Its chunks are
//! gathered into batches of about 1 MiB (the chunks themselves, shared, not
//! copied into one buffer), each handed at once to three workers — one writer per
//! store and one hasher (SHA-256, the figure users see; CRC-64, what the
//! read-back of each copy is checked against) — through short bounded
//! queues: receiving, hashing and both writes overlap on different cores,
//! a slow store slows the sender (TCP backpressure), and memory stays at a
//! few batches whatever the file's size. The writer lease's renewal can
//! stop it before the body ends ([`Halt`]).

use super::{
    failure::{failed, Failed, Fault},
    placing::{self, Streamed},
    store::{self, TempWriter},
    upload::Upload,
    writing::Halt,
    DatasetError,
};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use std::io;
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};

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

/// Writes `body` into both temporary objects from `offset`, unless `halt`
/// says to stop first.
pub(super) async fn stream_into<S>(
    upload: &Upload,
    offset: u64,
    mut body: S,
    mut halt: watch::Receiver<Option<Halt>>,
) -> Result<Received, Failed>
where
    S: Stream<Item = io::Result<Bytes>> + Unpin + Send,
{
    let [central, region] = &upload.stores;
    let a = match central.put_temp(&upload.temp, offset).await {
        Ok(a) => a,
        Err(e) => return Err(failed(upload, offset, Fault::Store(0, e)).await),
    };
    let b = match region.put_temp(&upload.temp, offset).await {
        Ok(b) => b,
        Err(e) => return Err(failed(upload, offset, Fault::Store(1, e)).await),
    };
    let mut pipes = Pipes::start([a, b]);
    let mut size = offset;
    let mut batch = Batch::default();
    let stop = loop {
        let next = tokio::select! {
            biased;
            why = told_to_stop(&mut halt) => break Some(Stop::Halted(why)),
            next = tokio::time::timeout(upload.body_idle, body.next()) => next,
        };
        let Ok(next) = next else {
            let idle = io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no bytes arrived for {} s", upload.body_idle.as_secs()),
            );
            break Some(Stop::Body(idle));
        };
        match next {
            Some(Ok(chunk)) => {
                size += chunk.len() as u64;
                if size > upload.max_bytes {
                    break Some(Stop::TooBig(size));
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
    let fault = match stop {
        None => {
            let sent = batch.chunks.is_empty() || pipes.send(batch.take()).await;
            let (writers, hashes) = pipes.close().await;
            match both(writers) {
                Ok(_) if !sent => Fault::Hashing,
                Ok(writers) => match finish(writers).await {
                    Ok(()) => return Ok(Received { size, hashes }),
                    Err(fault) => fault,
                },
                Err(fault) => fault,
            }
        }
        Some(Stop::TooBig(size)) => {
            pipes.close().await;
            Fault::TooBig(size)
        }
        Some(Stop::Halted(why)) => {
            pipes.close().await;
            return Err(halted(upload, offset, size, why).await);
        }
        Some(Stop::StoreFailed) => {
            let (writers, _) = pipes.close().await;
            both(writers).err().unwrap_or(Fault::Hashing)
        }
        Some(Stop::Body(e)) => {
            // Keep what was sent so far when the upload can resume.
            if upload.resumable {
                let _ = batch.chunks.is_empty() || pipes.send(batch.take()).await;
                let (writers, _) = pipes.close().await;
                let finished = match both(writers) {
                    Ok(writers) => finish(writers).await,
                    Err(fault) => Err(fault),
                };
                if finished.is_ok() {
                    let error = DatasetError::Incomplete(format!(
                        "the upload stopped after {size} bytes ({e}); resume from there"
                    ));
                    return Err(Failed { error, kept: true });
                }
            } else {
                pipes.close().await;
            }
            Fault::Cut(size, e)
        }
    };
    Err(failed(upload, offset, fault).await)
}

/// Resolves when the lease's renewal says stop; never, once it cannot.
async fn told_to_stop(halt: &mut watch::Receiver<Option<Halt>>) -> Halt {
    // Copied out: the channel's guard is not held across an await.
    let told = halt.wait_for(Option::is_some).await.map(|why| *why);
    match told {
        Ok(why) => why.unwrap_or(Halt::UploadEnded),
        Err(_) => std::future::pending().await,
    }
}

/// A request stopped by [`Halt`]. An upload that ended under it (its
/// version deleted) has nothing left to keep. One whose right ended keeps
/// none of this request's bytes, which came under that right: a resumable
/// upload goes back to what it held before.
async fn halted(upload: &Upload, offset: u64, size: u64, why: Halt) -> Failed {
    match why {
        Halt::VersionDeleted => Failed { error: placing::version_deleted(upload), kept: false },
        Halt::UploadEnded => Failed { error: placing::upload_ended(upload), kept: false },
        Halt::AccessEnded => {
            let Failed { kept, .. } =
                failed(upload, offset, Fault::Cut(size, io::Error::other("the uploader's access ended"))).await;
            let outcome = if kept {
                format!("the upload keeps the {offset} bytes held before this request")
            } else {
                "nothing was kept".into()
            };
            let why = format!(
                "the upload of {} stopped: the account's access ended while it was uploading (it was disabled, its session ended — signed out, idle too long, or by a password change or reset — or its API token was revoked); {outcome}",
                upload.name
            );
            Failed { error: DatasetError::Forbidden(why), kept }
        }
    }
}

/// Both writers back from their tasks, or the first store's failure.
fn both(results: Vec<Result<Written, tokio::task::JoinError>>) -> Result<Vec<(usize, Box<dyn TempWriter>)>, Fault> {
    let mut writers = Vec::with_capacity(2);
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(Ok(w)) => writers.push((i, w)),
            Ok(Err(e)) => return Err(Fault::Store(i, e)),
            Err(e) => return Err(Fault::Store(i, io::Error::other(e.to_string()))),
        }
    }
    Ok(writers)
}

/// Finishes both writers at once: everything written is in both stores.
async fn finish(writers: Vec<(usize, Box<dyn TempWriter>)>) -> Result<(), Fault> {
    let finished = futures_util::future::join_all(
        writers.into_iter().map(|(i, w)| async move { w.finish().await.map_err(|e| (i, e)) }),
    )
    .await;
    match finished.into_iter().find_map(Result::err) {
        Some((i, e)) => Err(Fault::Store(i, e)),
        None => Ok(()),
    }
}

enum Stop {
    /// The body brought this many bytes, more than the upload may.
    TooBig(u64),
    StoreFailed,
    Body(io::Error),
    Halted(Halt),
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
