//! The disk watcher: a machine's own filesystem (its container's writable
//! layer: everything outside `/data`) against its group's limit
//! (`groups.root_disk_mb`). Where the engine's storage driver enforces a
//! size the container was made with one (`executor::Limits::root_disk_mb`);
//! where it does not (vfs, overlay2 on ext4) nothing else stops a machine
//! from filling its node's disk, so every pass reads each running
//! machine's `SizeRw`, warns its owner from [`WARN_PERCENT`] of the limit
//! on, and stops it once over, saying why (its message and its history).
//! A compute task's machine over the limit ends its task failed with that
//! reason (`compute::watch` finishes it).
//!
//! An engine that does not answer is skipped for this pass, with nothing
//! changed; a container gone meanwhile is the reconciler's to notice.
//!
//! [`WARN_PERCENT`]: gantry_core::disk::WARN_PERCENT

mod act;
pub mod nodes;
pub mod usage;

use crate::{db::Pool, fleet::Fleet, PlatformError};
use gantry_core::disk::{verdict, Verdict};
use std::{collections::BTreeMap, time::Duration};

/// How long one node's machines may take to measure: the engine walks
/// each writable layer (vfs: the whole file tree) to count it.
const NODE_BUDGET: Duration = Duration::from_secs(60);

/// What a pass did, for the log and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// "machine NAME: …" for each warning written this pass.
    pub warned: Vec<String>,
    /// "machine NAME: stopped: …" for each machine stopped this pass.
    pub stopped: Vec<String>,
    /// Nodes not measured this pass, with why.
    pub skipped: Vec<String>,
}

/// One running machine with a limit, as read before its engine is asked.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Watched {
    pub id: i64,
    pub name: String,
    pub rev: i64,
    pub node_id: i64,
    pub container_id: String,
    pub limit_mb: i64,
    pub warned: bool,
    pub is_job: bool,
}

/// One pass over every running machine whose group has a limit. Machines
/// with an operation open (a snapshot pauses its container, a restart
/// replaces it) are left to the next pass.
pub async fn watch_once(pool: &Pool, fleet: &Fleet) -> Result<Report, PlatformError> {
    let rows: Vec<Watched> = sqlx::query_as(
        "SELECT m.id, m.name, m.rev, m.node_id, m.container_id, g.root_disk_mb AS limit_mb,
                m.root_disk_warned <> 0 AS warned, m.workload = 'job' AS is_job
         FROM machines m JOIN groups g ON g.id = m.group_id JOIN nodes n ON n.id = m.node_id
         WHERE m.state = 'running' AND m.container_id IS NOT NULL AND g.root_disk_mb > 0 AND n.state <> 'lost'
           AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.state IN ('pending', 'scheduled', 'running'))
         ORDER BY m.id",
    )
    .fetch_all(pool)
    .await?;
    let mut by_node: BTreeMap<i64, Vec<Watched>> = BTreeMap::new();
    for row in rows {
        by_node.entry(row.node_id).or_default().push(row);
    }
    // Nodes side by side, each node's machines one after another.
    let passes = by_node.into_iter().map(|(node, machines)| async move {
        let mut report = Report::default();
        let done = tokio::time::timeout(NODE_BUDGET, watch_node(pool, fleet, node, machines, &mut report)).await;
        match done {
            Ok(Ok(())) => {}
            Ok(Err(why)) => report.skipped.push(format!("node #{node}: {why}")),
            Err(_) => report.skipped.push(format!("node #{node}: not measured within {} s", NODE_BUDGET.as_secs())),
        }
        report
    });
    let mut report = Report::default();
    for r in futures_util::future::join_all(passes).await {
        report.warned.extend(r.warned);
        report.stopped.extend(r.stopped);
        report.skipped.extend(r.skipped);
    }
    Ok(report)
}

/// One node's machines; an engine error ends the node's pass (the rest of
/// its machines wait for the next one), a database error is reported.
async fn watch_node(
    pool: &Pool,
    fleet: &Fleet,
    node_id: i64,
    machines: Vec<Watched>,
    report: &mut Report,
) -> Result<(), String> {
    let exec = fleet.executor(pool, node_id).await.map_err(|e| e.to_string())?;
    for m in machines {
        let used = match exec.root_disk_bytes(&m.container_id).await {
            Ok(Some(used)) => used,
            // Gone meanwhile: the reconciler marks the machine.
            Ok(None) => continue,
            Err(e) => return Err(e.to_string()),
        };
        act::record_reading(pool, &m, used).await.map_err(|e| e.to_string())?;
        match verdict(used, m.limit_mb) {
            Verdict::Ok if m.warned => act::clear_warning(pool, &m).await.map_err(|e| e.to_string())?,
            Verdict::Ok => {}
            Verdict::Warn if m.warned => {}
            Verdict::Warn => report.warned.push(act::warn(pool, &m, used).await.map_err(|e| e.to_string())?),
            Verdict::Stop => {
                if let Some(done) = act::stop(pool, &exec, &m, used).await? {
                    report.stopped.push(done);
                }
            }
        }
    }
    Ok(())
}

/// Runs [`watch_once`] every `period` until the process ends.
pub async fn run(pool: Pool, fleet: Fleet, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (p, f) = (pool.clone(), fleet.clone());
        match crate::contained::pass("disk watcher", async move { watch_once(&p, &f).await }).await {
            Some(Ok(r)) => {
                if !r.warned.is_empty() || !r.stopped.is_empty() {
                    tracing::info!(warned = ?r.warned, stopped = ?r.stopped, "disk watcher");
                }
                if !r.skipped.is_empty() {
                    tracing::warn!(skipped = ?r.skipped, "disk watcher: nodes not measured this pass");
                }
            }
            None => {}
            Some(Err(e)) => tracing::error!(error = %e, "disk watcher failed"),
        }
    }
}
