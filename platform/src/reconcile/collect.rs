//! The collector's steps on one node: containers of machines that hold no
//! GPUs, GPUs left with a container that is gone, unused volumes, and
//! block-volume images nothing names.

use super::{db, Known, Node, Report, LIST_TIMEOUT};
use crate::{
    audit,
    db::Pool,
    executor::{loopdev, ManagedContainer},
    transitions, PlatformError,
};
use std::collections::{BTreeMap, HashSet};

impl Node<'_> {
    /// Containers of machines that hold no GPUs are garbage, wherever they
    /// came from — the invariant's other half. Each is re-checked against
    /// the database when it is removed; the ones removed are returned.
    pub(super) async fn collect_containers<'c>(
        &self,
        known: &[Known],
        containers: &'c [ManagedContainer],
        report: &mut Report,
    ) -> Result<HashSet<&'c str>, String> {
        let node_name = self.name;
        let holders: HashSet<i64> = known.iter().filter(|m| m.holds_gpus).map(|m| m.id).collect();
        let mut collected: HashSet<&str> = HashSet::new();
        for c in containers {
            if c.machine_id.is_some_and(|id| holders.contains(&id)) {
                continue;
            }
            if let Some(id) = c.machine_id {
                if holds_gpus_now(self.pool, id).await.map_err(db)? {
                    continue; // admitted after our read, or another node's
                }
            }
            match self.exec.remove_container(&c.id).await {
                Ok(()) => {
                    collected.insert(c.id.as_str());
                    let what = format!(
                        "container {} ({}) on node {node_name}: its machine holds no GPUs",
                        c.name,
                        &c.id[..c.id.len().min(12)]
                    );
                    audit::record(self.pool, None, "collect.container", &what).await.map_err(db)?;
                    tracing::warn!("collected {what}");
                    report.containers_collected.push(what);
                }
                Err(e) => {
                    tracing::warn!(container = %c.id, error = %e, "collector: could not remove container");
                    report.not_collected.push(format!("container {} on node {node_name}: {e}", c.name));
                }
            }
        }
        Ok(collected)
    }

    /// GPUs a given-up task left with its container are offered again only
    /// once the engine has no such container any more (judged on this
    /// pass's list, less what it removed).
    pub(super) async fn free_left_gpus(
        &self,
        containers: &[ManagedContainer],
        collected: &HashSet<&str>,
        left_before: &HashSet<(i64, i64)>,
        report: &mut Report,
    ) -> Result<(), String> {
        let remaining: Vec<&ManagedContainer> =
            containers.iter().filter(|c| !collected.contains(c.id.as_str())).collect();
        report.gpus_freed.extend(
            free_gpus_of_gone_containers(self.pool, self.id, self.name, &remaining, left_before).await.map_err(db)?,
        );
        Ok(())
    }

    /// A volume no live machine mounts and nobody kept only takes disk.
    pub(super) async fn collect_volumes(
        &self,
        mounted: &HashSet<&str>,
        volumes: &[String],
        report: &mut Report,
    ) -> Result<(), String> {
        let node_name = self.name;
        for name in volumes.iter().filter(|v| !mounted.contains(v.as_str())) {
            if volume_in_use_now(self.pool, name).await.map_err(db)? {
                continue;
            }
            match self.exec.remove_volume(name).await {
                Ok(()) => {
                    let what =
                        format!("volume {name} on node {node_name}: no live machine mounts it and it was not kept");
                    audit::record(self.pool, None, "collect.volume", &what).await.map_err(db)?;
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
        Ok(())
    }

    /// A create that died between making a block-volume image and its
    /// Docker volume, then was cancelled, leaves an image nothing names: no
    /// machine (but deleted or lost ones), no kept volume, no Docker volume
    /// (checked by the executor right before it removes the image).
    pub(super) async fn collect_images(
        &self,
        mounted: &HashSet<&str>,
        volumes: &[String],
        report: &mut Report,
    ) -> Result<(), String> {
        let node_name = self.name;
        for name in self.exec.list_volume_images(self.instance, loopdev::SWEEP_MIN_AGE) {
            if mounted.contains(name.as_str())
                || volumes.contains(&name)
                || volume_in_use_now(self.pool, &name).await.map_err(db)?
            {
                continue;
            }
            match tokio::time::timeout(LIST_TIMEOUT, self.exec.remove_orphan_image(&name)).await {
                Ok(Ok(None)) => {} // a Docker volume uses it
                Ok(Ok(Some(devices))) => {
                    let devices = if devices.is_empty() {
                        "no loop device attached".to_string()
                    } else {
                        format!("loop device {} detached", devices.join(", "))
                    };
                    let what = format!("volume image {name}.img on node {node_name} ({devices}): no machine, kept volume or Docker volume names it");
                    audit::record(self.pool, None, "collect.image", &what).await.map_err(db)?;
                    tracing::warn!("collected {what}");
                    report.images_collected.push(what);
                }
                Ok(Err(e)) => {
                    tracing::warn!(volume = %name, error = %e, "collector: could not remove volume image");
                    report.not_collected.push(format!("volume image {name}.img on node {node_name}: {e}"));
                }
                Err(_) => report
                    .not_collected
                    .push(format!("volume image {name}.img on node {node_name}: engine did not answer")),
            }
        }
        Ok(())
    }
}

/// Frees the node's GPUs left to the collector (`gpus_left_to_collector`)
/// whose machine has no container among `remaining` (this pass's list,
/// less what it removed) but the one it runs now, if it holds GPUs again:
/// a restore removes the old container before it makes its own. A
/// container without a machine label may be any machine's.
async fn free_gpus_of_gone_containers(
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
