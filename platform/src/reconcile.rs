//! The reconciler: compares what the database believes with what each
//! node's Docker Engine has, and repairs the difference. Machines follow
//! their containers (exited, vanished, running again); containers that
//! Gantry labelled but no live machine owns are reported and removed.

use crate::{audit, db::Pool, executor::ContainerStatus, fleet::Fleet, now, PlatformError};
use std::collections::HashMap;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// "machine X: running → stopped (exit code 1)" and the like.
    pub changes: Vec<String>,
    pub orphans_removed: Vec<String>,
    /// Nodes whose engine did not answer; nothing about them was changed.
    pub unreachable: Vec<String>,
}

pub async fn reconcile_once(pool: &Pool, fleet: &Fleet) -> Result<Report, PlatformError> {
    let mut report = Report::default();
    let instance = crate::machines::instance_id(pool).await?;
    for (node_id, node_name, exec) in fleet.all(pool).await? {
        let containers = match exec.list_managed(&instance).await {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(node = %node_name, error = %e, "reconcile: engine unreachable");
                report.unreachable.push(node_name);
                continue;
            }
        };
        // Machines on this node that no task is working on right now.
        let machines: Vec<(i64, String, String, Option<String>)> = sqlx::query_as(
            "SELECT m.id, m.name, m.state, m.container_id FROM machines m
             WHERE m.node_id = ? AND m.state <> 'deleted'
               AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.state IN ('pending', 'scheduled', 'running'))",
        )
        .bind(node_id)
        .fetch_all(pool)
        .await?;
        let by_id: HashMap<&str, ContainerStatus> = containers.iter().map(|c| (c.id.as_str(), c.status)).collect();
        for (machine_id, name, state, container_id) in &machines {
            let Some(container_id) = container_id else { continue };
            let (next, exit_code, message) = match by_id.get(container_id.as_str()) {
                Some(ContainerStatus::Running) => ("running", None, String::new()),
                Some(ContainerStatus::Exited { code }) => ("stopped", Some(*code), format!("container exited with code {code}")),
                Some(other) => ("failed", None, format!("container is {other:?}")),
                None => ("failed", None, format!("container vanished from node {node_name}")),
            };
            // A failed machine whose container is still gone stays as it is.
            if next != state.as_str() {
                sqlx::query("UPDATE machines SET state = ?, exit_code = ?, message = ?, updated_at = ? WHERE id = ?")
                    .bind(next)
                    .bind(exit_code)
                    .bind(&message)
                    .bind(now())
                    .bind(machine_id)
                    .execute(pool)
                    .await?;
                let change = format!("machine {name}: {state} → {next}{}", if message.is_empty() { String::new() } else { format!(" ({message})") });
                audit::record(pool, None, "reconcile.drift", &change).await?;
                report.changes.push(change);
            }
        }
        // Labelled containers that belong to no live machine on this node.
        let live: Vec<i64> = sqlx::query_scalar("SELECT id FROM machines WHERE node_id = ? AND state <> 'deleted'")
            .bind(node_id)
            .fetch_all(pool)
            .await?;
        for c in &containers {
            if c.machine_id.is_some_and(|id| live.contains(&id)) {
                continue;
            }
            match exec.remove_container(&c.id).await {
                Ok(()) => {
                    let what = format!("orphan container {} ({}) on node {node_name} removed", c.name, &c.id[..c.id.len().min(12)]);
                    audit::record(pool, None, "reconcile.orphan", &what).await?;
                    tracing::warn!("{what}");
                    report.orphans_removed.push(what);
                }
                Err(e) => tracing::warn!(container = %c.id, error = %e, "reconcile: could not remove orphan"),
            }
        }
    }
    Ok(report)
}

/// Runs `reconcile_once` every `period` until the process ends.
pub async fn run(pool: Pool, fleet: Fleet, period: std::time::Duration) {
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        match reconcile_once(&pool, &fleet).await {
            Ok(r) if !r.changes.is_empty() || !r.orphans_removed.is_empty() => {
                tracing::info!(changes = ?r.changes, orphans = ?r.orphans_removed, "reconciled");
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "reconcile failed"),
        }
    }
}
