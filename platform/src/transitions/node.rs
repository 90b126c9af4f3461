//! Node states that change machines: marking a node lost releases every
//! machine on it at once (quota refunded), ends the tasks that were waiting
//! for or running on it, and leaves the leftovers to the collector.

use super::{begin, machine, snapshot, task};
use crate::{audit, db::Pool, PlatformError};
use gantry_core::{
    alloc::NodeState,
    task::{MachineState, TaskKind, TaskState},
};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LostReport {
    pub machines: Vec<String>,
    pub gpus_refunded: i64,
    pub tasks_ended: i64,
}

/// The longest reason an admin may give for a node's state.
pub const MAX_REASON: usize = 200;

/// Shown on the Nodes page, in the audit log and — for a lost node — in
/// the message of every machine and task it took down: a line of text.
fn checked_reason(reason: &str) -> Result<&str, PlatformError> {
    let reason = reason.trim();
    if reason.chars().count() > MAX_REASON || reason.chars().any(char::is_control) {
        return Err(PlatformError::BadRequest(format!(
            "a node's state reason is one line of at most {MAX_REASON} characters"
        )));
    }
    Ok(reason)
}

/// Sets a node ready, draining or down (machines stay where they are).
pub async fn set_state(
    pool: &Pool,
    actor: Option<i64>,
    node_id: i64,
    state: NodeState,
    reason: &str,
) -> Result<(), PlatformError> {
    let reason = checked_reason(reason)?;
    if state == NodeState::Lost {
        return mark_lost(pool, actor, node_id, reason).await.map(|_| ());
    }
    let mut tx = begin(pool).await?;
    let (name, was): (String, String) = sqlx::query_as("SELECT name, state FROM nodes WHERE id = ?")
        .bind(node_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| PlatformError::NotFound("node".into()))?;
    if was == NodeState::Lost.as_str() {
        // Its machines were released; bringing it back is adding it anew.
        return Err(PlatformError::Conflict(format!(
            "node {name} is lost; remove it, and add it again once it is repaired"
        )));
    }
    sqlx::query("UPDATE nodes SET state = ?, state_reason = ? WHERE id = ?")
        .bind(state.as_str())
        .bind(reason)
        .bind(node_id)
        .execute(&mut *tx)
        .await?;
    audit::record(
        &mut *tx,
        actor,
        "node.state",
        &format!(
            "node {name}: {was} → {state}{}",
            if reason.is_empty() { String::new() } else { format!(" ({reason})") }
        ),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The node is gone: every live machine on it becomes `lost` with its GPUs
/// given back, and its open tasks end (`cancelled` if they had not
/// started, `failed` if a dispatcher was running them: that runner's lease
/// is void from this commit on).
pub async fn mark_lost(
    pool: &Pool,
    actor: Option<i64>,
    node_id: i64,
    reason: &str,
) -> Result<LostReport, PlatformError> {
    let reason = checked_reason(reason)?;
    let reason = if reason.is_empty() { "marked lost by an administrator" } else { reason };
    let mut tx = begin(pool).await?;
    let name: String = sqlx::query_scalar("SELECT name FROM nodes WHERE id = ?")
        .bind(node_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| PlatformError::NotFound("node".into()))?;
    sqlx::query("UPDATE nodes SET state = 'lost', state_reason = ? WHERE id = ?")
        .bind(reason)
        .bind(node_id)
        .execute(&mut *tx)
        .await?;
    let mut report = LostReport::default();
    let open: Vec<(i64, String, String, i64, bool)> = sqlx::query_as(
        "SELECT t.id, t.state, t.kind, t.machine_id, t.keep_volume FROM tasks t JOIN machines m ON m.id = t.machine_id
         WHERE m.node_id = ? AND t.state IN ('pending', 'scheduled', 'running')",
    )
    .bind(node_id)
    .fetch_all(&mut *tx)
    .await?;
    for (task_id, state, kind, machine_id, keep_volume) in open {
        let from: TaskState =
            state.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string()))?;
        let to = if from == TaskState::Running { TaskState::Failed } else { TaskState::Cancelled };
        let why = format!("node {name} was lost: {reason}");
        task::set_state(&mut tx, task_id, from, to, &why).await?;
        // Its snapshot fails with it: a `creating` one could never be
        // deleted and would count against the group's quota for ever.
        if matches!(kind.parse(), Ok(TaskKind::Snapshot | TaskKind::Reclaim)) {
            snapshot::task_ended(&mut tx, task_id, &why).await?;
        }
        // A volume its owner asked to keep stays kept, as when such a task
        // ends any other way: a delete keeping its volume, or a create
        // made on a kept volume (given back). Not listed, it would be
        // deleted by the collector once the repaired engine is added again,
        // and the node could be removed without a word about it.
        match kind.parse() {
            Ok(TaskKind::Delete) if keep_volume => {
                super::run::keep_machines_volume(&mut tx, machine_id, false).await?;
            }
            Ok(TaskKind::Create) => {
                super::run::keep_machines_volume(&mut tx, machine_id, true).await?;
            }
            _ => {}
        }
        report.tasks_ended += 1;
    }
    let machines: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, name FROM machines WHERE node_id = ? AND state NOT IN ('deleted', 'lost') ORDER BY id",
    )
    .bind(node_id)
    .fetch_all(&mut *tx)
    .await?;
    for (machine_id, machine_name) in machines {
        let message = format!("node {name} was lost ({reason}); GPUs returned to the group's quota");
        report.gpus_refunded += machine::release(&mut tx, machine_id, MachineState::Lost, &message).await?;
        report.machines.push(machine_name);
    }
    audit::record(
        &mut *tx,
        actor,
        "node.lost",
        &format!(
            "node {name} marked lost ({reason}): {} machine(s) released, {} GPU(s) refunded, {} task(s) ended",
            report.machines.len(),
            report.gpus_refunded,
            report.tasks_ended
        ),
    )
    .await?;
    tx.commit().await?;
    Ok(report)
}

/// Removes a node that holds no live machine and no kept volume (typically
/// a lost one, or one drained empty): its GPUs go, its closed machines keep
/// their history without it. Its engine is not touched: leftovers there are
/// no longer Gantry's to collect.
pub async fn remove(pool: &Pool, actor: Option<i64>, node_id: i64) -> Result<String, PlatformError> {
    let mut tx = begin(pool).await?;
    let name: String = sqlx::query_scalar("SELECT name FROM nodes WHERE id = ?")
        .bind(node_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| PlatformError::NotFound("node".into()))?;
    let live: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM machines WHERE node_id = ? AND state NOT IN ('deleted', 'lost')")
            .bind(node_id)
            .fetch_one(&mut *tx)
            .await?;
    if live > 0 {
        return Err(PlatformError::Conflict(format!(
            "node {name} still has {live} machine(s); delete them, or mark the node lost, first"
        )));
    }
    // Kept volumes are users' data, not leftovers: forgetting them here
    // would let the collector delete them as soon as this engine is added
    // again (what a repaired lost node is told to do). Deleting one only
    // forgets it, even on a lost node, so the way out is always open.
    let kept: Vec<(String, String)> = sqlx::query_as(
        "SELECT k.name, u.username FROM kept_volumes k JOIN users u ON u.id = k.owner_id WHERE k.node_id = ? ORDER BY u.username, k.name",
    )
    .bind(node_id)
    .fetch_all(&mut *tx)
    .await?;
    if !kept.is_empty() {
        let listed: Vec<String> = kept.iter().map(|(volume, owner)| format!("{volume} ({owner})")).collect();
        return Err(PlatformError::Conflict(format!(
            "node {name} still holds {} kept data volume(s): {}; their owners or an admin delete them on the Volumes page first",
            kept.len(),
            listed.join(", ")
        )));
    }
    sqlx::query("UPDATE machines SET node_id = NULL WHERE node_id = ?").bind(node_id).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM gpus WHERE node_id = ?").bind(node_id).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM nodes WHERE id = ?").bind(node_id).execute(&mut *tx).await?;
    audit::record(&mut *tx, actor, "node.remove", &format!("node {name} removed")).await?;
    tx.commit().await?;
    Ok(name)
}
