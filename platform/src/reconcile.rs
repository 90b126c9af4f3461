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

use crate::{
    audit,
    db::Pool,
    executor::{loopdev, ContainerStatus, Executor, ManagedContainer},
    fleet::Fleet,
    transitions, PlatformError,
};
use gantry_core::task::MachineState;
use std::collections::{BTreeMap, HashMap, HashSet};

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

async fn reconcile_node(
    pool: &Pool,
    exec: &Executor,
    instance: &str,
    node_id: i64,
    node_name: &str,
    report: &mut Report,
) -> Result<(), String> {
    let db = |e: PlatformError| e.to_string();
    type Row = (i64, String, String, i64, Option<String>, bool, String, Option<i64>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT m.id, m.name, m.state, m.rev, m.container_id, EXISTS (SELECT 1 FROM machine_gpus mg WHERE mg.machine_id = m.id), m.volume_name,
                CASE WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.state IN ('pending', 'scheduled', 'running')) THEN NULL
                     ELSE COALESCE((SELECT MAX(t.id) FROM tasks t WHERE t.machine_id = m.id), 0) END
         FROM machines m WHERE m.node_id = ? AND m.state NOT IN ('deleted', 'lost')",
    )
    .bind(node_id)
    .fetch_all(pool)
    .await
    .map_err(|e| db(e.into()))?;
    let known: Vec<Known> = rows
        .into_iter()
        .filter_map(|(id, name, state, rev, container_id, holds_gpus, volume, settled_after_task)| {
            Some(Known {
                id,
                name,
                state: state.parse().ok()?,
                rev,
                container_id,
                holds_gpus,
                volume,
                settled_after_task,
            })
        })
        .collect();
    // A black-holed engine must not hold up the other nodes' pass.
    let bounded =
        |what: &'static str| move |_| format!("engine did not answer {what} within {} s", LIST_TIMEOUT.as_secs());
    // GPUs left to the collector after this read may belong to a container
    // the list below does not show yet: they are not freed this pass.
    let left_before: HashSet<(i64, i64)> = sqlx::query_as(
        "SELECT x.machine_id, x.gpu_id FROM gpus_left_to_collector x JOIN gpus g ON g.id = x.gpu_id WHERE g.node_id = ?",
    )
    .bind(node_id)
    .fetch_all(pool)
    .await
    .map_err(|e| db(e.into()))?
    .into_iter()
    .collect();
    let containers = tokio::time::timeout(LIST_TIMEOUT, exec.list_managed(instance))
        .await
        .map_err(bounded("the container list"))?
        .map_err(|e| e.to_string())?;
    let volumes = tokio::time::timeout(LIST_TIMEOUT, exec.list_managed_volumes(instance))
        .await
        .map_err(bounded("the volume list"))?
        .map_err(|e| e.to_string())?;

    // 1. Machines follow their containers.
    let by_id: HashMap<&str, ContainerStatus> = containers.iter().map(|c| (c.id.as_str(), c.status)).collect();
    for m in known.iter().filter(|m| m.holds_gpus) {
        let Some(container_id) = &m.container_id else {
            continue;
        };
        if let (Some(last_task), Some(ContainerStatus::Running | ContainerStatus::Exited { .. })) =
            (m.settled_after_task, by_id.get(container_id.as_str()))
        {
            report.seen.insert(m.id, last_task);
        }
        let (next, exit_code, message) = match by_id.get(container_id.as_str()) {
            // Gantry pauses a container only while committing it (a
            // snapshot, a reclaim), and the commit that ended since the list
            // does not move the machine's `rev`: no observation.
            Some(ContainerStatus::Paused) => continue,
            Some(ContainerStatus::Running) => (MachineState::Running, None, String::new()),
            Some(ContainerStatus::Exited { code }) => {
                (MachineState::Stopped, Some(*code), format!("container exited with code {code}"))
            }
            Some(other) => (MachineState::Failed, None, format!("container is {other:?}")),
            None => (MachineState::Failed, None, format!("container vanished from node {node_name}")),
        };
        if next == m.state {
            continue;
        }
        let mut tx = transitions::begin(pool).await.map_err(db)?;
        if transitions::machine::observe_if_unchanged(&mut tx, m.id, m.rev, next, exit_code, &message)
            .await
            .map_err(db)?
        {
            let change = format!(
                "machine {}: {} → {next}{}",
                m.name,
                m.state,
                if message.is_empty() { String::new() } else { format!(" ({message})") }
            );
            audit::record(&mut *tx, None, "reconcile.drift", &change).await.map_err(db)?;
            tx.commit().await.map_err(|e| db(e.into()))?;
            report.changes.push(change);
        }
    }

    // 2. Containers of machines that hold no GPUs are garbage, wherever
    //    they came from. Re-checked at removal time against the database.
    let holders: HashSet<i64> = known.iter().filter(|m| m.holds_gpus).map(|m| m.id).collect();
    let mut collected: HashSet<&str> = HashSet::new();
    for c in &containers {
        if c.machine_id.is_some_and(|id| holders.contains(&id)) {
            continue;
        }
        if let Some(id) = c.machine_id {
            if holds_gpus_now(pool, id).await.map_err(db)? {
                continue; // admitted after our read, or another node's
            }
        }
        match exec.remove_container(&c.id).await {
            Ok(()) => {
                collected.insert(c.id.as_str());
                let what = format!(
                    "container {} ({}) on node {node_name}: its machine holds no GPUs",
                    c.name,
                    &c.id[..c.id.len().min(12)]
                );
                audit::record(pool, None, "collect.container", &what).await.map_err(db)?;
                tracing::warn!("collected {what}");
                report.containers_collected.push(what);
            }
            Err(e) => {
                tracing::warn!(container = %c.id, error = %e, "collector: could not remove container");
                report.not_collected.push(format!("container {} on node {node_name}: {e}", c.name));
            }
        }
    }

    // 2b. GPUs a given-up task left with its container are free once the
    //     engine has no such container any more.
    let remaining: Vec<&ManagedContainer> = containers.iter().filter(|c| !collected.contains(c.id.as_str())).collect();
    report.gpus_freed.extend(free_left_gpus(pool, node_id, node_name, &remaining, &left_before).await.map_err(db)?);

    // 3. Volumes no live machine mounts and nobody kept.
    let mounted: HashSet<&str> = known.iter().map(|m| m.volume.as_str()).collect();
    for name in volumes.iter().filter(|v| !mounted.contains(v.as_str())) {
        if volume_in_use_now(pool, name).await.map_err(db)? {
            continue;
        }
        match exec.remove_volume(name).await {
            Ok(()) => {
                let what = format!("volume {name} on node {node_name}: no live machine mounts it and it was not kept");
                audit::record(pool, None, "collect.volume", &what).await.map_err(db)?;
                tracing::warn!("collected {what}");
                report.volumes_collected.push(what);
            }
            // In use by a container that is itself about to be collected.
            Err(e) => {
                tracing::warn!(volume = %name, error = %e, "collector: could not remove volume");
                report.not_collected.push(format!("volume {name} on node {node_name}: {e}"));
            }
        }
    }

    // 4. Block-volume images nothing names: no machine (but deleted or
    //    lost ones), no kept volume, no Docker volume (checked by the
    //    executor right before it removes the image).
    for name in exec.list_volume_images(instance, loopdev::SWEEP_MIN_AGE) {
        if mounted.contains(name.as_str())
            || volumes.contains(&name)
            || volume_in_use_now(pool, &name).await.map_err(db)?
        {
            continue;
        }
        match tokio::time::timeout(LIST_TIMEOUT, exec.remove_orphan_image(&name)).await {
            Ok(Ok(None)) => {} // a Docker volume uses it
            Ok(Ok(Some(devices))) => {
                let devices = if devices.is_empty() {
                    "no loop device attached".to_string()
                } else {
                    format!("loop device {} detached", devices.join(", "))
                };
                let what = format!("volume image {name}.img on node {node_name} ({devices}): no machine, kept volume or Docker volume names it");
                audit::record(pool, None, "collect.image", &what).await.map_err(db)?;
                tracing::warn!("collected {what}");
                report.images_collected.push(what);
            }
            Ok(Err(e)) => {
                tracing::warn!(volume = %name, error = %e, "collector: could not remove volume image");
                report.not_collected.push(format!("volume image {name}.img on node {node_name}: {e}"));
            }
            Err(_) => {
                report.not_collected.push(format!("volume image {name}.img on node {node_name}: engine did not answer"))
            }
        }
    }
    Ok(())
}

/// Frees the node's GPUs left to the collector (`gpus_left_to_collector`)
/// whose machine has no container among `remaining` (this pass's list,
/// less what it removed) but the one it runs now, if it holds GPUs again:
/// a restore removes the old container before it makes its own. A
/// container without a machine label may be any machine's.
async fn free_left_gpus(
    pool: &Pool,
    node_id: i64,
    node_name: &str,
    remaining: &[&ManagedContainer],
    left_before: &HashSet<(i64, i64)>,
) -> Result<Vec<String>, PlatformError> {
    // Only GPUs left before the containers were listed: the list says
    // nothing of a container a task made and gave up on while the pass
    // went on.
    let rows: Vec<(i64, i64, Option<String>, bool)> = sqlx::query_as(
        "SELECT x.machine_id, x.gpu_id, m.container_id, EXISTS (SELECT 1 FROM machine_gpus mg WHERE mg.machine_id = x.machine_id)
         FROM gpus_left_to_collector x JOIN gpus g ON g.id = x.gpu_id LEFT JOIN machines m ON m.id = x.machine_id
         WHERE g.node_id = ? ORDER BY x.machine_id",
    )
    .bind(node_id)
    .fetch_all(pool)
    .await?;
    let mut by_machine: BTreeMap<i64, (Option<String>, bool, Vec<i64>)> = BTreeMap::new();
    for (machine_id, gpu_id, current, holds) in rows {
        if !left_before.contains(&(machine_id, gpu_id)) {
            continue;
        }
        by_machine.entry(machine_id).or_insert((current, holds, Vec::new())).2.push(gpu_id);
    }
    let mut freed = Vec::new();
    for (machine_id, (current, holds, gpus)) in by_machine {
        let left = remaining.iter().any(|c| match c.machine_id {
            None => true,
            Some(id) => id == machine_id && !(holds && current.as_deref() == Some(c.id.as_str())),
        });
        if left {
            continue;
        }
        let mut tx = transitions::begin(pool).await?;
        let n = transitions::machine::left_gpus_collected(&mut tx, machine_id, &gpus).await?;
        tx.commit().await?;
        if n > 0 {
            freed.push(format!("{n} GPU(s) on node {node_name}: machine #{machine_id}'s container is gone"));
        }
    }
    Ok(freed)
}

/// Whether the machine holds GPUs, on whichever node: two node rows may
/// name one engine (a node renamed at start, an engine added twice), and a
/// container this node's engine lists may be another node's live machine.
async fn holds_gpus_now(pool: &Pool, machine_id: i64) -> Result<bool, PlatformError> {
    Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM machine_gpus WHERE machine_id = ?)")
        .bind(machine_id)
        .fetch_one(pool)
        .await?)
}

async fn volume_in_use_now(pool: &Pool, name: &str) -> Result<bool, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM machines WHERE volume_name = ?1 AND state NOT IN ('deleted', 'lost'))
             OR EXISTS (SELECT 1 FROM kept_volumes WHERE name = ?1)",
    )
    .bind(name)
    .fetch_one(pool)
    .await?)
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
