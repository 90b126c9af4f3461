//! Deciding one batch's requests, one after the other, in the batch's
//! transaction: each request's checks and its allocation are steps of
//! their own, on what the batch has read and decided so far.

mod nodes;

use super::{
    check_limits, load_policy, record_admission, refuse, requester_changed, resolve_image, take_kept_volume, Admitted,
    CreateMachine, KeptVolume,
};
use crate::{
    cluster,
    db::Tx,
    machines::room::{self, NodeCpus},
    transitions, PlatformError,
};
use gantry_core::{
    alloc::{Allocation, ClusterIndex, GroupPolicy},
    task::TaskState,
};
use std::collections::HashMap;

/// What the batch's decisions share: the cluster as the requests admitted
/// so far leave it, and what was read once per group or image.
pub(super) struct Batch {
    pub(super) now: i64,
    index: ClusterIndex,
    node_cpus: Vec<NodeCpus>,
    policies: HashMap<i64, GroupPolicy>,
    deducted: HashMap<i64, i64>,
    images: HashMap<(Option<i64>, i64), Result<i64, String>>,
    /// Each group's region rule: the nodes of the regions it may use.
    region_nodes: HashMap<i64, Option<Vec<i64>>>,
    /// Nodes whose free disk is below the floor, with the refusal's words.
    low_disk: Vec<(i64, String)>,
    pub(super) audit_rows: Vec<(i64, String)>,
}

/// Why one request goes no further.
enum Stop {
    /// Refused: recorded with its reason ([`refuse`]).
    Refused(String),
    /// Answered as it is, nothing recorded.
    Conflict(String),
    /// The batch itself failed: nothing of it is written.
    Failed(PlatformError),
}

impl From<PlatformError> for Stop {
    fn from(e: PlatformError) -> Stop {
        Stop::Failed(e)
    }
}

impl Batch {
    /// Read under the write lock, so every request is decided on the
    /// cluster as it is and as the batch's earlier requests leave it.
    pub(super) async fn read(tx: &mut Tx, now: i64) -> Result<Batch, PlatformError> {
        let view = cluster::load_view(tx).await?;
        let index = ClusterIndex::new(&view, now);
        let node_cpus = room::node_cpus(tx).await?;
        let low_disk = crate::disk::nodes::below_floor(tx).await?;
        Ok(Batch {
            now,
            index,
            node_cpus,
            policies: HashMap::new(),
            deducted: HashMap::new(),
            images: HashMap::new(),
            region_nodes: HashMap::new(),
            low_disk,
            audit_rows: Vec::new(),
        })
    }

    /// One request's answer; `Err` only when the whole batch must roll back.
    pub(super) async fn decide(
        &mut self,
        tx: &mut Tx,
        req: &CreateMachine,
    ) -> Result<Result<Admitted, PlatformError>, PlatformError> {
        match self.admit(tx, req).await {
            Ok(admitted) => Ok(Ok(admitted)),
            Err(Stop::Refused(reason)) => Ok(Err(refuse(tx, req, reason, self.now).await?)),
            Err(Stop::Conflict(why)) => Ok(Err(PlatformError::Conflict(why))),
            Err(Stop::Failed(e)) => Err(e),
        }
    }

    /// Every check refuses this request alone, before anything of it is
    /// written; only a request that passes them all takes GPUs and rows.
    async fn admit(&mut self, tx: &mut Tx, req: &CreateMachine) -> Result<Admitted, Stop> {
        requester_unchanged(tx, req).await?;
        self.load_policy(tx, req.requester.group_id).await?;
        let image = self.image(tx, req).await?;
        self.within_limits(tx, req).await?;
        self.job_still_placeable(tx, req).await?;
        datasets_still_there(tx, req).await?;
        let kept = kept_volume(tx, req).await?;
        let (only_nodes, narrowed) = self.allowed_nodes(tx, req, kept.as_ref()).await?;
        let (only_nodes, too_small) = self.fitting_nodes(req, only_nodes)?;
        let (only_nodes, low_disk) = self.roomy_disks(only_nodes);
        if !low_disk.is_empty() && only_nodes.as_ref().is_some_and(Vec::is_empty) {
            return Err(Stop::Refused(format!("no node can take this machine: {}", low_disk.join("; "))));
        }
        let alloc = self.allocate(tx, req, only_nodes, narrowed, &too_small).await.map_err(|stop| match stop {
            Stop::Refused(reason) if !low_disk.is_empty() => {
                Stop::Refused(format!("{reason}; {}", low_disk.join("; ")))
            }
            other => other,
        })?;
        let admitted = record(tx, req, image, &alloc, kept.as_ref(), self.now).await?;
        self.count(req, &alloc, &admitted);
        Ok(admitted)
    }

    /// Read once per group and batch: the requests admitted before count
    /// against it as they are decided.
    async fn load_policy(&mut self, tx: &mut Tx, group_id: i64) -> Result<(), PlatformError> {
        if let std::collections::hash_map::Entry::Vacant(e) = self.policies.entry(group_id) {
            e.insert(load_policy(tx, group_id).await?);
        }
        Ok(())
    }

    /// Loaded by `load_policy` before any step that reads it.
    fn policy(&self, group_id: i64) -> &GroupPolicy {
        self.policies.get(&group_id).expect("loaded first")
    }

    /// A compute task runs its region's image; a person's image is
    /// resolved (and its refusal known) once per image and group.
    async fn image(&mut self, tx: &mut Tx, req: &CreateMachine) -> Result<i64, Stop> {
        if let Some(job) = &req.job {
            return Ok(crate::images::internal_image_for(tx, &job.image_reference).await?);
        }
        let image_key = (req.image_id, req.requester.group_id);
        if let std::collections::hash_map::Entry::Vacant(e) = self.images.entry(image_key) {
            e.insert(resolve_image(tx, req).await?);
        }
        self.images[&image_key].clone().map_err(Stop::Refused)
    }

    /// The group's per-machine CPU and memory limits.
    async fn within_limits(&self, tx: &mut Tx, req: &CreateMachine) -> Result<(), Stop> {
        check_limits(tx, req, self.policy(req.requester.group_id)).await?.map_err(Stop::Refused)
    }

    /// The region the matcher chose for a compute task: the group may
    /// have lost it since (re-checked here, under the write lock).
    async fn job_still_placeable(&self, tx: &mut Tx, req: &CreateMachine) -> Result<(), Stop> {
        let Some(job) = &req.job else {
            return Ok(());
        };
        // Cancelled (or placed by another server) since the matcher
        // chose it: refused alone. Found later, its state change would
        // fail the whole batch, other people's requests included.
        let state = transitions::compute::find_state(tx, job.compute_task_id).await?;
        if state != Some(TaskState::Pending) {
            return Err(Stop::Conflict(format!(
                "compute task #{} is no longer waiting ({}); nothing was created",
                job.compute_task_id,
                state.map_or("gone", |s| s.as_str())
            )));
        }
        let group_id = req.requester.group_id;
        let group_name = &self.policy(group_id).group_name;
        match crate::policy_access::refusal_for_regions(tx, group_id, group_name, &[job.region_id]).await? {
            Some(refusal) => Err(Stop::Refused(refusal)),
            None => Ok(()),
        }
    }

    /// What the next requests are decided on: the GPUs taken, the group's
    /// use; and the quota and audit rows the batch writes once at its end.
    fn count(&mut self, req: &CreateMachine, alloc: &Allocation, admitted: &Admitted) {
        let group_id = req.requester.group_id;
        self.index.apply(alloc);
        self.policies.get_mut(&group_id).expect("loaded first").gpus_in_use += i64::from(req.gpu_count);
        *self.deducted.entry(group_id).or_default() += i64::from(req.gpu_count);
        let gpu_list = admitted.gpu_indexes.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        self.audit_rows.push((
            req.requester.id,
            format!(
                "machine {} ({} × {}) on {} GPU {gpu_list}; group {} quota deducted",
                req.name, req.gpu_count, alloc.model, alloc.node_name, req.requester.group_name
            ),
        ));
    }

    /// Belt and braces: the column itself must stay within the quota, or
    /// the whole batch rolls back.
    pub(super) async fn deduct_quotas(&self, tx: &mut Tx) -> Result<(), PlatformError> {
        for (&group_id, &n) in &self.deducted {
            let done = sqlx::query(
                "UPDATE groups SET gpus_in_use = gpus_in_use + ?1 WHERE id = ?2 AND gpus_in_use + ?1 <= gpu_quota",
            )
            .bind(n)
            .bind(group_id)
            .execute(&mut **tx)
            .await?;
            if done.rows_affected() != 1 {
                return Err(PlatformError::Internal(format!(
                    "quota check failed for group #{group_id}; batch rolled back"
                )));
            }
        }
        Ok(())
    }
}

/// The account as it is now, under the write lock: disabled, or moved to
/// another group, since the request was made — a group move is refused
/// while the account owns a machine, and must stay so.
async fn requester_unchanged(tx: &mut Tx, req: &CreateMachine) -> Result<(), Stop> {
    match requester_changed(tx, &req.requester).await? {
        Some(refusal) => Err(Stop::Refused(refusal)),
        None => Ok(()),
    }
}

/// A dataset version deleted since the request was checked refuses this
/// request alone, not the whole batch through the foreign key.
async fn datasets_still_there(tx: &mut Tx, req: &CreateMachine) -> Result<(), Stop> {
    match crate::datasets::mounts::first_missing(tx, &req.datasets).await.map_err(PlatformError::from)? {
        Some(gone) => Err(Stop::Refused(format!(
            "dataset version {gone} was deleted after the request was made; nothing was created"
        ))),
        None => Ok(()),
    }
}

/// A kept volume holds its owner's data: read under the write lock, so it
/// is still there and still the requester's to mount.
async fn kept_volume(tx: &mut Tx, req: &CreateMachine) -> Result<Option<KeptVolume>, Stop> {
    match req.kept_volume_id {
        None => Ok(None),
        Some(id) => take_kept_volume(tx, req, id).await?.map(Some).map_err(Stop::Refused),
    }
}

/// The live-name unique index answers "name taken" without a look-up; a
/// failed statement leaves the transaction intact.
async fn record(
    tx: &mut Tx,
    req: &CreateMachine,
    image: i64,
    alloc: &Allocation,
    kept: Option<&KeptVolume>,
    now: i64,
) -> Result<Admitted, Stop> {
    match record_admission(tx, req, image, alloc, kept, now).await? {
        Some(admitted) => Ok(admitted),
        None => Err(Stop::Conflict(format!("you already have a machine named \"{}\"", req.name))),
    }
}
