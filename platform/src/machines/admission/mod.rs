//! Admitting create requests. One worker task takes requests from a queue
//! and decides them in batches: each batch is one `BEGIN IMMEDIATE`
//! transaction that reads the cluster and the groups' quotas, lets the
//! scheduling core pick GPUs request by request, and writes machines, held
//! GPUs, quota deductions, tasks and audit rows together. Batching is what
//! gets past the disk's fsync rate; the single writer (and SQLite's write
//! lock across processes) is what keeps quota exact under any concurrency.

mod checks;
mod record;

pub(crate) use checks::{check_group_limits, check_limits, image_refusal, load_policy, requester_changed};
use checks::{resolve_image, take_kept_volume};
pub(crate) use record::record_admission;
use record::refuse;

use super::{room, VOLUME_GB_MAX, VOLUME_GB_MIN};
use crate::{accounts::User, audit, cluster, db::Pool, executor::Limits, now, transitions, PlatformError};
use gantry_core::{
    alloc::{allocate, AllocationRequest, ClusterIndex, ClusterView, GroupPolicy},
    task::TaskState,
    validate,
};
use std::{collections::HashMap, sync::Arc};
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

async fn decide_batch(
    pool: &Pool,
    requests: &[CreateMachine],
) -> Result<Vec<Result<Admitted, PlatformError>>, PlatformError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    let now = now();
    let view = cluster::load_view(&mut tx).await?;
    let mut index = ClusterIndex::new(&view, now);
    let node_cpus = room::node_cpus(&mut tx).await?;
    let mut policies: HashMap<i64, GroupPolicy> = HashMap::new();
    let mut deducted: HashMap<i64, i64> = HashMap::new();
    let mut images: HashMap<(Option<i64>, i64), Result<i64, String>> = HashMap::new();
    // Each group's region rule: the nodes of the regions it may use.
    let mut region_nodes: HashMap<i64, Option<Vec<i64>>> = HashMap::new();
    let mut audit_rows: Vec<(i64, String)> = Vec::new();
    let mut results = Vec::with_capacity(requests.len());

    for req in requests {
        let group_id = req.requester.group_id;
        // The account as it is now, under the write lock: disabled, or
        // moved to another group, since the request was made — a group move
        // is refused while the account owns a machine, and must stay so.
        if let Some(refusal) = requester_changed(&mut tx, &req.requester).await? {
            results.push(Err(refuse(&mut tx, req, refusal, now).await?));
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = policies.entry(group_id) {
            e.insert(load_policy(&mut tx, group_id).await?);
        }
        let image = match &req.job {
            Some(job) => crate::images::internal_image_for(&mut tx, &job.image_reference).await?,
            None => {
                let image_key = (req.image_id, group_id);
                if let std::collections::hash_map::Entry::Vacant(e) = images.entry(image_key) {
                    e.insert(resolve_image(&mut tx, req).await?);
                }
                match &images[&image_key] {
                    Ok(image) => *image,
                    Err(refusal) => {
                        results.push(Err(refuse(&mut tx, req, refusal.clone(), now).await?));
                        continue;
                    }
                }
            }
        };
        let policy = policies.get_mut(&group_id).expect("loaded above");
        if let Err(refusal) = check_limits(&mut tx, req, policy).await? {
            results.push(Err(refuse(&mut tx, req, refusal, now).await?));
            continue;
        }
        // The region the matcher chose for a compute task: the group may
        // have lost it since (re-checked here, under the write lock).
        if let Some(job) = &req.job {
            // Cancelled (or placed by another server) since the matcher
            // chose it: refused alone. Found later, its state change would
            // fail the whole batch, other people's requests included.
            let state = transitions::compute::find_state(&mut tx, job.compute_task_id).await?;
            if state != Some(TaskState::Pending) {
                let why = format!(
                    "compute task #{} is no longer waiting ({}); nothing was created",
                    job.compute_task_id,
                    state.map_or("gone", |s| s.as_str())
                );
                results.push(Err(PlatformError::Conflict(why)));
                continue;
            }
            if let Some(refusal) =
                crate::policy_access::refusal_for_regions(&mut tx, group_id, &policy.group_name, &[job.region_id])
                    .await?
            {
                results.push(Err(refuse(&mut tx, req, refusal, now).await?));
                continue;
            }
        }
        // Deleted since the request was checked: refused alone, not the
        // whole batch through the foreign key.
        if let Some(gone) = crate::datasets::mounts::first_missing(&mut tx, &req.datasets).await? {
            let reason = format!("dataset version {gone} was deleted after the request was made; nothing was created");
            results.push(Err(refuse(&mut tx, req, reason, now).await?));
            continue;
        }
        let kept = match req.kept_volume_id {
            None => None,
            Some(id) => match take_kept_volume(&mut tx, req, id).await? {
                Ok(kept) => Some(kept),
                Err(refusal) => {
                    results.push(Err(refuse(&mut tx, req, refusal, now).await?));
                    continue;
                }
            },
        };
        let request = AllocationRequest { gpu_count: req.gpu_count, model: req.gpu_model.clone() };
        // A kept volume lives on one node, a compute task runs in its
        // region on a node of its image's architecture with room for its
        // CPU and memory (as the matcher counted them; a node that declared
        // no CPUs is not counted), and no machine goes to a node with fewer
        // CPUs than it asks for (see `room`): the allocation is made among
        // those nodes only.
        let only_nodes: Option<Vec<i64>> = match (&kept, &req.job) {
            (Some(k), _) => Some(vec![k.node_id]),
            (None, Some(job)) => Some(room::job_nodes(&mut tx, job, &req.limits()).await?),
            (None, None) => None,
        };
        // Only nodes of the regions the group may use.
        if let std::collections::hash_map::Entry::Vacant(e) = region_nodes.entry(group_id) {
            e.insert(crate::policy_access::allowed_nodes(&mut tx, group_id).await?);
        }
        let allowed = region_nodes[&group_id].as_deref();
        let (only_nodes, narrowed) =
            match room::in_regions(&mut tx, group_id, &policy.group_name, &node_cpus, allowed, only_nodes).await? {
                Ok(narrowed) => narrowed,
                Err(refusal) => {
                    results.push(Err(refuse(&mut tx, req, refusal, now).await?));
                    continue;
                }
            };
        let (only_nodes, too_small) = room::fitting(&node_cpus, only_nodes, &req.limits());
        if !too_small.is_empty() && only_nodes.as_ref().is_some_and(Vec::is_empty) {
            let reason = format!("no node can take this machine: {}", room::too_small(&too_small, &req.limits()));
            results.push(Err(refuse(&mut tx, req, reason, now).await?));
            continue;
        }
        let decided = match only_nodes {
            Some(ids) => {
                let full = index.to_view();
                let only =
                    ClusterView { nodes: full.nodes.into_iter().filter(|n| ids.contains(&n.id)).collect(), ..full };
                allocate(&only, policy, &request, now)
            }
            None => index.allocate(policy, &request),
        };
        let alloc = match decided {
            Ok(alloc) => alloc,
            Err(refusal) => {
                let mut reason = match too_small.is_empty() {
                    true => refusal.to_string(),
                    false => format!("{refusal} ({})", room::too_small(&too_small, &req.limits())),
                };
                if narrowed {
                    reason.push_str(&crate::policy_access::region_note(&mut tx, group_id, &policy.group_name).await?);
                }
                results.push(Err(refuse(&mut tx, req, reason, now).await?));
                continue;
            }
        };
        // The live-name unique index answers "name taken" without a look-up;
        // a failed statement leaves the transaction intact.
        let Some(admitted) = record_admission(&mut tx, req, image, &alloc, kept.as_ref(), now).await? else {
            results.push(Err(PlatformError::Conflict(format!("you already have a machine named \"{}\"", req.name))));
            continue;
        };
        index.apply(&alloc);
        policy.gpus_in_use += i64::from(req.gpu_count);
        *deducted.entry(group_id).or_default() += i64::from(req.gpu_count);
        let gpu_list = admitted.gpu_indexes.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        audit_rows.push((
            req.requester.id,
            format!(
                "machine {} ({} × {}) on {} GPU {gpu_list}; group {} quota deducted",
                req.name, req.gpu_count, alloc.model, alloc.node_name, req.requester.group_name
            ),
        ));
        results.push(Ok(admitted));
    }
    for (group_id, n) in deducted {
        // Belt and braces: the column itself must stay within the quota.
        let done = sqlx::query(
            "UPDATE groups SET gpus_in_use = gpus_in_use + ?1 WHERE id = ?2 AND gpus_in_use + ?1 <= gpu_quota",
        )
        .bind(n)
        .bind(group_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            return Err(PlatformError::Internal(format!(
                "quota check failed for group #{group_id}; batch rolled back"
            )));
        }
    }
    audit::record_many(&mut tx, "machine.admit", &audit_rows, now).await?;
    tx.commit().await?;
    Ok(results)
}
