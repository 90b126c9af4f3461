//! Admitting create requests. One worker task takes requests from a queue
//! and decides them in batches: each batch is one `BEGIN IMMEDIATE`
//! transaction that reads the cluster and the groups' quotas, lets the
//! scheduling core pick GPUs request by request, and writes machines, held
//! GPUs, quota deductions, tasks and audit rows together. Batching is what
//! gets past the disk's fsync rate; the single writer (and SQLite's write
//! lock across processes) is what keeps quota exact under any concurrency.

mod checks;
mod decide;
mod record;

pub(crate) use checks::{check_group_limits, check_limits, image_refusal, load_policy, requester_changed};
use checks::{resolve_image, take_kept_volume};
use decide::Batch;
pub(crate) use record::record_admission;
use record::refuse;

use super::{VOLUME_GB_MAX, VOLUME_GB_MIN};
use crate::{accounts::User, audit, db::Pool, executor::Limits, now, PlatformError};
use gantry_core::validate;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};

/// Most requests decided in one transaction.
const MAX_BATCH: usize = 512;

#[derive(Debug, Clone)]
pub struct CreateMachine {
    pub requester: User,
    pub name: String,
    /// None: the default image.
    pub image_id: Option<i64>,
    pub gpu_count: u32,
    /// None: any model the group may use.
    pub gpu_model: Option<String>,
    pub volume_size_gb: i64,
    /// None: the defaults ([`Limits::default`]).
    pub cpu_millis: Option<i64>,
    pub memory_mb: Option<i64>,
    /// Create the machine on this kept volume (its node, its size).
    pub kept_volume_id: Option<i64>,
    /// A compute task's machine: runs `command` from a region image, on a
    /// node of that region.
    pub job: Option<Job>,
    /// Sealed dataset versions bound read-only (resolved by
    /// `datasets::mounts::resolve`), recorded with the machine.
    pub datasets: Vec<crate::datasets::mounts::DatasetMount>,
}

#[derive(Debug, Clone)]
pub struct Job {
    pub compute_task_id: i64,
    pub region_id: i64,
    /// The region image the matcher chose: its architecture decides which
    /// of the region's nodes can run it.
    pub region_image_id: i64,
    pub image_reference: String,
    pub command: Vec<String>,
    /// The matcher's decision (JSON) this placement follows: written with
    /// the placement, as another pass may have recorded its own since.
    pub decision: String,
}

impl CreateMachine {
    /// A request with default limits and a new volume.
    pub fn new(requester: User, name: impl Into<String>, gpu_count: u32, volume_size_gb: i64) -> CreateMachine {
        CreateMachine {
            requester,
            name: name.into(),
            image_id: None,
            gpu_count,
            gpu_model: None,
            volume_size_gb,
            cpu_millis: None,
            memory_mb: None,
            kept_volume_id: None,
            job: None,
            datasets: Vec::new(),
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        let d = Limits::default();
        Limits {
            cpu_millis: self.cpu_millis.unwrap_or(d.cpu_millis),
            memory_mb: self.memory_mb.unwrap_or(d.memory_mb),
            pids: d.pids,
            // The group's, read when the container is made (`dispatch::context`).
            root_disk_mb: d.root_disk_mb,
        }
    }
}

/// A kept volume a create asked for: where it lives and how big it is.
#[derive(Debug, Clone)]
pub(crate) struct KeptVolume {
    name: String,
    node_id: i64,
    size_gb: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub machine_id: i64,
    pub task_id: i64,
    pub node_name: String,
    pub gpu_indexes: Vec<u32>,
    pub model: String,
}

type Reply = oneshot::Sender<Result<Admitted, PlatformError>>;

/// Handle to the admission worker; cheap to clone.
#[derive(Clone)]
pub struct Admissions {
    queue: mpsc::Sender<(CreateMachine, Reply)>,
}

impl Admissions {
    /// Starts the worker. `dispatch` is woken after each committed batch.
    pub fn start(pool: Pool, dispatch: Arc<Notify>) -> Admissions {
        let (queue, rx) = mpsc::channel(4 * MAX_BATCH);
        tokio::spawn(worker(pool, rx, dispatch));
        Admissions { queue }
    }

    /// Decides one create request; waits for its batch to commit.
    pub async fn create(&self, req: CreateMachine) -> Result<Admitted, PlatformError> {
        check_request(&req)?;
        let (tx, rx) = oneshot::channel();
        self.queue.send((req, tx)).await.map_err(|_| PlatformError::Internal("admission worker stopped".into()))?;
        rx.await.map_err(|_| PlatformError::Internal("admission worker stopped".into()))?
    }
}

/// Input rules that need no database; refused before queueing.
fn check_request(req: &CreateMachine) -> Result<(), PlatformError> {
    // A compute task's machine is named by the system, in a form no name a
    // person chooses can take (`validate::job_machine_name`).
    if req.job.is_none() {
        validate::name("machine name", &req.name)?;
    }
    validate::in_range("GPU count", req.gpu_count as i64, 1, 64)?;
    validate::in_range("volume size (GB)", req.volume_size_gb, VOLUME_GB_MIN, VOLUME_GB_MAX)?;
    if let Some(cpu) = req.cpu_millis {
        validate::in_range("CPU (thousandths)", cpu, 100, 256_000)?;
    }
    if let Some(mem) = req.memory_mb {
        validate::in_range("memory (MB)", mem, 64, 4 * 1024 * 1024)?;
    }
    if let Some(model) = &req.gpu_model {
        if model.is_empty() || model.len() > 64 {
            return Err(PlatformError::BadRequest("GPU model must be 1 to 64 characters".into()));
        }
    }
    Ok(())
}

async fn worker(pool: Pool, mut rx: mpsc::Receiver<(CreateMachine, Reply)>, dispatch: Arc<Notify>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let (requests, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
        match decide_batch(&pool, &requests).await {
            Ok(results) => {
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(result);
                }
                dispatch.notify_one();
            }
            Err(e) => {
                tracing::error!(error = %e, size = requests.len(), "admission batch failed; nothing was written");
                for reply in replies {
                    let _ = reply.send(Err(PlatformError::Internal(
                        "the scheduler could not record the request; try again".into(),
                    )));
                }
            }
        }
    }
}

/// One transaction for the whole batch: every request is decided on what
/// the ones before it took, and the quota is written once, exactly.
async fn decide_batch(
    pool: &Pool,
    requests: &[CreateMachine],
) -> Result<Vec<Result<Admitted, PlatformError>>, PlatformError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    let mut batch = Batch::read(&mut tx, now()).await?;
    let mut results = Vec::with_capacity(requests.len());
    for req in requests {
        results.push(batch.decide(&mut tx, req).await?);
    }
    batch.deduct_quotas(&mut tx).await?;
    audit::record_many(&mut tx, "machine.admit", &batch.audit_rows, batch.now).await?;
    tx.commit().await?;
    Ok(results)
}
