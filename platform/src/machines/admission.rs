//! Admitting create requests. One worker task takes requests from a queue
//! and decides them in batches: each batch is one `BEGIN IMMEDIATE`
//! transaction that reads the cluster and the groups' quotas, lets the
//! scheduling core pick GPUs request by request, and writes machines, held
//! GPUs, quota deductions, tasks and audit rows together. Batching is what
//! gets past the disk's fsync rate; the single writer (and SQLite's write
//! lock across processes) is what keeps quota exact under any concurrency.

use super::{room, VOLUME_GB_MAX, VOLUME_GB_MIN};
use crate::{
    accounts::User,
    audit, cluster,
    db::Pool,
    error::is_unique_violation,
    executor::Limits,
    now,
    transitions::{self, task::NewTask},
    PlatformError,
};
use gantry_core::{
    alloc::{allocate, AllocationRequest, ClusterIndex, ClusterView, GroupPolicy},
    task::{TaskKind, TaskState},
    validate,
};
use sqlx::SqliteConnection;
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
        Limits { cpu_millis: self.cpu_millis.unwrap_or(d.cpu_millis), memory_mb: self.memory_mb.unwrap_or(d.memory_mb), pids: d.pids }
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
                    let _ = reply.send(Err(PlatformError::Internal("the scheduler could not record the request; try again".into())));
                }
            }
        }
    }
}

async fn decide_batch(pool: &Pool, requests: &[CreateMachine]) -> Result<Vec<Result<Admitted, PlatformError>>, PlatformError> {
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
        if !policies.contains_key(&group_id) {
            policies.insert(group_id, load_policy(&mut tx, group_id).await?);
        }
        let image = match &req.job {
            Some(job) => crate::images::internal_image_for(&mut tx, &job.image_reference).await?,
            None => {
                let image_key = (req.image_id, group_id);
                if !images.contains_key(&image_key) {
                    images.insert(image_key, resolve_image(&mut tx, req).await?);
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
                let why = format!("compute task #{} is no longer waiting ({}); nothing was created", job.compute_task_id, state.map_or("gone", |s| s.as_str()));
                results.push(Err(PlatformError::Conflict(why)));
                continue;
            }
            if let Some(refusal) = crate::policy_access::refusal_for_regions(&mut tx, group_id, &policy.group_name, &[job.region_id]).await? {
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
        if !region_nodes.contains_key(&group_id) {
            region_nodes.insert(group_id, crate::policy_access::allowed_nodes(&mut tx, group_id).await?);
        }
        let allowed = region_nodes[&group_id].as_deref();
        let (only_nodes, narrowed) = match room::in_regions(&mut tx, group_id, &policy.group_name, &node_cpus, allowed, only_nodes).await? {
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
                let only = ClusterView { nodes: full.nodes.into_iter().filter(|n| ids.contains(&n.id)).collect(), ..full };
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
            format!("machine {} ({} × {}) on {} GPU {gpu_list}; group {} quota deducted", req.name, req.gpu_count, alloc.model, alloc.node_name, req.requester.group_name),
        ));
        results.push(Ok(admitted));
    }
    for (group_id, n) in deducted {
        // Belt and braces: the column itself must stay within the quota.
        let done = sqlx::query("UPDATE groups SET gpus_in_use = gpus_in_use + ?1 WHERE id = ?2 AND gpus_in_use + ?1 <= gpu_quota")
            .bind(n)
            .bind(group_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Err(PlatformError::Internal(format!("quota check failed for group #{group_id}; batch rolled back")));
        }
    }
    audit::record_many(&mut tx, "machine.admit", &audit_rows, now).await?;
    tx.commit().await?;
    Ok(results)
}

pub(crate) async fn load_policy(conn: &mut SqliteConnection, group_id: i64) -> Result<GroupPolicy, PlatformError> {
    let (name, quota, in_use, max): (String, i64, i64, i64) =
        sqlx::query_as("SELECT name, gpu_quota, gpus_in_use, max_gpus_per_machine FROM groups WHERE id = ?")
            .bind(group_id)
            .fetch_one(&mut *conn)
            .await?;
    let allowed_models: Vec<String> =
        sqlx::query_scalar("SELECT model FROM group_gpu_models WHERE group_id = ? ORDER BY model").bind(group_id).fetch_all(&mut *conn).await?;
    Ok(GroupPolicy { group_name: name, gpu_quota: quota, gpus_in_use: in_use, max_gpus_per_machine: max, allowed_models })
}

/// The image to use, or why the group may not use it.
async fn resolve_image(conn: &mut SqliteConnection, req: &CreateMachine) -> Result<Result<i64, String>, PlatformError> {
    let row: Option<(i64, String)> = match req.image_id {
        Some(id) => sqlx::query_as("SELECT id, name FROM images WHERE id = ? AND internal = 0").bind(id).fetch_optional(&mut *conn).await?,
        None => sqlx::query_as("SELECT id, name FROM images WHERE is_default = 1").fetch_optional(&mut *conn).await?,
    };
    let Some((id, name)) = row else {
        return Ok(Err(match req.image_id {
            Some(_) => "the chosen image does not exist".to_string(),
            None => "no default image is configured; ask an administrator to add one".to_string(),
        }));
    };
    match image_refusal(conn, req.requester.group_id, &req.requester.group_name, Some((id, &name))).await? {
        Some(why) => Ok(Err(why)),
        None => Ok(Ok(id)),
    }
}

/// The group's image rule (set on the admin's Groups page), named: why it
/// may not use `image` (`None`: an image no longer known, allowed only when
/// the group may use every image). Also applied to the image a snapshot
/// comes from (`snapshots::create_machine`).
pub(crate) async fn image_refusal(conn: &mut SqliteConnection, group_id: i64, group_name: &str, image: Option<(i64, &str)>) -> Result<Option<String>, PlatformError> {
    let allowed: (i64, i64) = sqlx::query_as("SELECT COUNT(*), COALESCE(SUM(image_id = ?), 0) FROM group_images WHERE group_id = ?")
        .bind(image.map(|i| i.0))
        .bind(group_id)
        .fetch_one(&mut *conn)
        .await?;
    if allowed.0 == 0 || allowed.1 > 0 {
        return Ok(None);
    }
    let names: Vec<String> = sqlx::query_scalar("SELECT i.name FROM group_images g JOIN images i ON i.id = g.image_id WHERE g.group_id = ? ORDER BY i.name")
        .bind(group_id)
        .fetch_all(&mut *conn)
        .await?;
    let what = image.map_or_else(|| "an image that is no longer known".to_string(), |(_, name)| format!("image {name}"));
    Ok(Some(format!("group {group_name} may not use {what} (it may use only {})", names.join(", "))))
}

/// Records a refused create as a failed task (so it shows in the task list
/// with its reason) and returns the error for the requester.
async fn refuse(conn: &mut SqliteConnection, req: &CreateMachine, reason: String, _now: i64) -> Result<PlatformError, PlatformError> {
    if req.job.is_some() {
        // A compute task stays pending with this reason and is tried again.
        return Ok(PlatformError::Refused(reason));
    }
    let task_id = transitions::task::insert_pending(conn, &new_task(req, None, "accepted")).await?;
    transitions::task::set_state(conn, task_id, TaskState::Pending, TaskState::Failed, &reason).await?;
    Ok(PlatformError::Refused(reason))
}

fn new_task<'a>(req: &'a CreateMachine, machine_id: Option<i64>, message: &'a str) -> NewTask<'a> {
    NewTask {
        kind: TaskKind::Create,
        machine_id,
        machine_name: &req.name,
        requester_id: req.requester.id,
        group_id: req.requester.group_id,
        keep_volume: false,
        message,
    }
}

/// Why a request made by `who` can no longer be admitted: the account was
/// disabled, or moved to another group, after the request was made.
pub(crate) async fn requester_changed(conn: &mut SqliteConnection, who: &User) -> Result<Option<String>, PlatformError> {
    let now: Option<(i64, bool)> = sqlx::query_as("SELECT group_id, disabled FROM users WHERE id = ?").bind(who.id).fetch_optional(&mut *conn).await?;
    Ok(match now {
        None => Some(format!("account {} no longer exists; nothing was created", who.username)),
        Some((_, true)) => Some(format!("account {} was disabled after the request was made; nothing was created", who.username)),
        Some((group, false)) if group != who.group_id => {
            Some(format!("account {} was moved to another group after the request was made; nothing was created", who.username))
        }
        Some(_) => None,
    })
}

/// CPU and memory within the group's per-machine limits.
pub(crate) async fn check_limits(conn: &mut SqliteConnection, req: &CreateMachine, policy: &GroupPolicy) -> Result<Result<(), String>, PlatformError> {
    check_group_limits(conn, req.requester.group_id, &req.limits(), policy).await
}

/// `limits` within group `group_id`'s per-machine limits (`policy` is that
/// group's): also for a machine that comes back (restore).
pub(crate) async fn check_group_limits(conn: &mut SqliteConnection, group_id: i64, limits: &Limits, policy: &GroupPolicy) -> Result<Result<(), String>, PlatformError> {
    let (max_cpus, max_mem_gb): (i64, i64) =
        sqlx::query_as("SELECT max_cpus_per_machine, max_memory_gb_per_machine FROM groups WHERE id = ?")
            .bind(group_id)
            .fetch_one(&mut *conn)
            .await?;
    if limits.cpu_millis > max_cpus * 1000 {
        return Ok(Err(format!(
            "group {} may use at most {max_cpus} CPU(s) per machine; this machine asks for {}",
            policy.group_name,
            limits.cpu_millis as f64 / 1000.0
        )));
    }
    if limits.memory_mb > max_mem_gb * 1024 {
        return Ok(Err(format!(
            "group {} may use at most {max_mem_gb} GB of memory per machine; this machine asks for {} MB",
            policy.group_name, limits.memory_mb
        )));
    }
    Ok(Ok(()))
}

/// The kept volume, if it is the requester's (an admin may take any): it
/// holds its owner's data, which a group member may not enter. It stops
/// being "kept" only when the machine that mounts it is written.
async fn take_kept_volume(conn: &mut SqliteConnection, req: &CreateMachine, id: i64) -> Result<Result<KeptVolume, String>, PlatformError> {
    let row: Option<(String, i64, i64, i64)> = sqlx::query_as("SELECT name, node_id, size_gb, owner_id FROM kept_volumes WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    match row {
        Some((name, node_id, size_gb, owner)) if owner == req.requester.id || req.requester.role.is_admin() => {
            // A delete that gave up on an engine that did not answer lists
            // the volume at once, but the old container (fenced off with
            // its GPUs until the collector has seen it gone) may still run
            // on it: a new machine would share the volume with it.
            let old_container: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM gpus_left_to_collector x JOIN machines m ON m.id = x.machine_id WHERE m.volume_name = ?)",
            )
            .bind(&name)
            .fetch_one(&mut *conn)
            .await?;
            if old_container {
                return Ok(Err(format!(
                    "kept volume {name} may still be in use by the container of the machine it came from (its node's engine did not answer when that machine was deleted); \
                     it can be used once the node's engine has removed that container — try again in a minute"
                )));
            }
            Ok(Ok(KeptVolume { name, node_id, size_gb }))
        }
        _ => Ok(Err("the chosen kept volume does not exist".to_string())),
    }
}

/// Writes the machine, its GPUs and its task; `None` when the owner already
/// has a live machine of that name (nothing written).
pub(crate) async fn record_admission(
    conn: &mut SqliteConnection,
    req: &CreateMachine,
    image_id: i64,
    alloc: &gantry_core::alloc::Allocation,
    kept: Option<&KeptVolume>,
    now: i64,
) -> Result<Option<Admitted>, PlatformError> {
    let n = i64::from(req.gpu_count);
    let limits = req.limits();
    // A new volume's name derives from the machine id, known after insert.
    let volume = kept.map(|k| k.name.clone()).unwrap_or_else(|| format!("pending-{}", rand::random::<u64>()));
    let size = kept.map(|k| k.size_gb).unwrap_or(req.volume_size_gb);
    let inserted = sqlx::query_scalar(
        "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb,
                               cpu_millis, memory_mb, pids_limit, workload, command, state, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'creating', ?, ?) RETURNING id",
    )
    .bind(&req.name)
    .bind(req.requester.id)
    .bind(req.requester.group_id)
    .bind(image_id)
    .bind(n)
    .bind(&alloc.model)
    .bind(alloc.node_id)
    .bind(&volume)
    .bind(size)
    .bind(limits.cpu_millis)
    .bind(limits.memory_mb)
    .bind(limits.pids)
    .bind(if req.job.is_some() { "job" } else { "dev" })
    .bind(req.job.as_ref().map(|j| serde_json::to_string(&j.command).unwrap_or_default()))
    .bind(now)
    .bind(now)
    .fetch_one(&mut *conn)
    .await;
    let machine_id: i64 = match inserted {
        Ok(id) => id,
        Err(e) if is_unique_violation(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match kept {
        None => {
            let sql = format!("UPDATE machines SET volume_name = {} WHERE id = ?", super::VOLUME_NAME_SQL);
            sqlx::query(&sql).bind(machine_id).execute(&mut *conn).await?;
        }
        Some(k) => {
            sqlx::query("DELETE FROM kept_volumes WHERE name = ?").bind(&k.name).execute(&mut *conn).await?;
        }
    }
    crate::datasets::mounts::attach(conn, machine_id, &req.datasets).await?;
    // One statement for all its GPUs; the primary key on gpu_id makes
    // holding a GPU twice impossible.
    let placeholders = vec!["?"; alloc.gpus.len()].join(", ");
    let sql = format!("INSERT INTO machine_gpus (gpu_id, machine_id) SELECT id, ? FROM gpus WHERE uuid IN ({placeholders})");
    let mut held = sqlx::query(&sql).bind(machine_id);
    for gpu in &alloc.gpus {
        held = held.bind(&gpu.uuid);
    }
    if held.execute(&mut *conn).await?.rows_affected() != alloc.gpus.len() as u64 {
        return Err(PlatformError::Internal(format!("GPUs of machine {} vanished during admission", req.name)));
    }
    let gpu_list = alloc.gpus.iter().map(|g| g.index.to_string()).collect::<Vec<_>>().join(",");
    let task_id = transitions::task::insert_pending(conn, &new_task(req, Some(machine_id), "accepted")).await?;
    let placed = format!("allocated {n} × {} on {} (GPU {gpu_list})", alloc.model, alloc.node_name);
    transitions::task::set_state(conn, task_id, TaskState::Pending, TaskState::Scheduled, &placed).await?;
    if let Some(job) = &req.job {
        transitions::compute::scheduled(conn, job, machine_id, &placed).await?;
    }
    Ok(Some(Admitted {
        machine_id,
        task_id,
        node_name: alloc.node_name.clone(),
        gpu_indexes: alloc.gpus.iter().map(|g| g.index).collect(),
        model: alloc.model.clone(),
    }))
}
