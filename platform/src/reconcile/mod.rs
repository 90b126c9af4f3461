//! The reconciler and collector: compares what the database believes with
//! what each node's Docker Engine has, and repairs the difference.
//!
//! - Machines follow their containers (exited, vanished, running again),
//!   written only if the row is unchanged since it was read (its `rev`) and
//!   no task works on the machine: a delete or restart that finishes in
//!   between is never overwritten, and nothing is resurrected.
//! - The collector removes, by label, every container of this installation
//!   whose machine holds no GPUs (deleted, lost, failed create, unknown) —
//!   the invariant's other half — and every data volume that no live
//!   machine mounts and nobody kept. A GPU a given-up delete or create left
//!   with its container (`gpus_left_to_collector`) is offered again once
//!   the engine has no such container left. It also sweeps the node's volume
//!   directory for block-volume images nothing names any more (a create
//!   that died between making the image and its Docker volume, then was
//!   cancelled): no machine, kept volume or Docker volume of that name, and
//!   older than `loopdev::SWEEP_MIN_AGE` (a create elsewhere may be making it).
//! - Each node is visited on its own: an unreachable engine or a broken
//!   endpoint is reported and skipped, and the next node is reconciled.
//! - Then reclaim snapshots no machine needs any more (their machine was
//!   deleted, or a newer reclaim replaced them) are deleted, image first
//!   ([`crate::snapshots::sweep_reclaim`]).

mod collect;
mod observe;

use crate::{db::Pool, executor::Executor, fleet::Fleet, PlatformError};
use gantry_core::task::MachineState;
use std::collections::{HashMap, HashSet};

/// How long one engine may take to list its containers or volumes.
const LIST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// "machine X: running → stopped (exit code 1)" and the like.
    pub changes: Vec<String>,
    pub containers_collected: Vec<String>,
    pub volumes_collected: Vec<String>,
    /// Block-volume images (and their loop devices) nothing named.
    pub images_collected: Vec<String>,
    /// Reclaim snapshots (row and image) no machine needs any more.
    pub snapshots_collected: Vec<String>,
    /// Garbage the engine refused to remove this pass, with why; the next
    /// pass tries again (until then such a container may still hold its
    /// GPU, which is offered to nobody).
    pub not_collected: Vec<String>,
    /// GPUs left with a given-up task's container, free again now that
    /// the container is gone.
    pub gpus_freed: Vec<String>,
    /// Nodes whose engine did not answer (or could not be set up), with why.
    pub unreachable: Vec<String>,
    /// Machines whose recorded container this pass saw on its node, listed
    /// after all their tasks up to this one (the id) had ended (see
    /// `snapshots::sweep_reclaim`).
    pub seen: HashMap<i64, i64>,
}

pub async fn reconcile_once(pool: &Pool, fleet: &Fleet) -> Result<Report, PlatformError> {
    let mut report = Report::default();
    let instance = crate::machines::instance_id(pool).await?;
    for node in fleet.all(pool).await? {
        let outcome = match &node.executor {
            Ok(exec) => reconcile_node(pool, exec, &instance, node.id, &node.name, &mut report).await,
            Err(e) => Err(e.to_string()),
        };
        if let Err(why) = outcome {
            tracing::debug!(node = %node.name, %why, "reconcile: node skipped");
            report.unreachable.push(format!("{}: {why}", node.name));
        }
    }
    let swept = crate::snapshots::sweep_reclaim(pool, fleet, &report.seen).await?;
    report.snapshots_collected = swept.deleted;
    report.not_collected.extend(swept.not_deleted);
    Ok(report)
}

/// Machines on the node, read before the engine is asked, so a change made
/// after this read shows up as a newer `rev` and the observation is dropped.
struct Known {
    id: i64,
    name: String,
    state: MachineState,
    rev: i64,
    container_id: Option<String>,
    holds_gpus: bool,
    volume: String,
    /// The machine's newest task when it was read, if none was under way
    /// then: a container seen after that has outlived every task so far.
    settled_after_task: Option<i64>,
}

/// One node's pass, in this order: machines first follow their containers,
/// so that the collector judges garbage by what they hold now.
async fn reconcile_node(
    pool: &Pool,
    exec: &Executor,
    instance: &str,
    node_id: i64,
    node_name: &str,
    report: &mut Report,
) -> Result<(), String> {
    let node = Node { pool, exec, instance, id: node_id, name: node_name };
    let known = node.known_machines().await?;
    let left_before = node.gpus_left_before().await?;
    let containers = node.containers().await?;
    let volumes = node.volumes().await?;
    node.follow_containers(&known, &containers, report).await?;
    let collected = node.collect_containers(&known, &containers, report).await?;
    node.free_left_gpus(&containers, &collected, &left_before, report).await?;
    let mounted: HashSet<&str> = known.iter().map(|m| m.volume.as_str()).collect();
    node.collect_volumes(&mounted, &volumes, report).await?;
    node.collect_images(&mounted, &volumes, report).await
}

/// One node's pass: what its steps share, so each takes only what is its own.
struct Node<'a> {
    pool: &'a Pool,
    exec: &'a Executor,
    instance: &'a str,
    id: i64,
    name: &'a str,
}

/// A pass reports a database error as the node's failure, as it does an
/// engine's, and goes on with the next node.
fn db(e: impl Into<PlatformError>) -> String {
    e.into().to_string()
}

/// Runs `reconcile_once` every `period` until the process ends.
pub async fn run(pool: Pool, fleet: Fleet, period: std::time::Duration) {
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        let (p, f) = (pool.clone(), fleet.clone());
        match crate::contained::pass("reconcile", async move { reconcile_once(&p, &f).await }).await {
            Some(Ok(r))
                if !r.changes.is_empty()
                    || !r.containers_collected.is_empty()
                    || !r.volumes_collected.is_empty()
                    || !r.images_collected.is_empty()
                    || !r.snapshots_collected.is_empty()
                    || !r.gpus_freed.is_empty()
                    || !r.not_collected.is_empty() =>
            {
                tracing::info!(changes = ?r.changes, containers = ?r.containers_collected, volumes = ?r.volumes_collected,
                    images = ?r.images_collected, snapshots = ?r.snapshots_collected, gpus_freed = ?r.gpus_freed, not_collected = ?r.not_collected, "reconciled");
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) => tracing::error!(error = %e, "reconcile failed"),
        }
    }
}
