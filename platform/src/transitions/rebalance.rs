//! Hot-GPU rebalancing: queueing a move the core decided, swapping the
//! GPUs a machine holds (after its container was removed, before the new
//! one is created: the machine never holds GPUs another container is
//! pinned to), and recording why, with the numbers.

use super::{begin, lease::fenced, machine, reclaim::busy, snapshot, task, Lease};
use crate::{audit, db::Pool, PlatformError};
use gantry_core::{
    reclaim::MachineEventKind,
    task::{accepts, MachineState, TaskKind, TaskState},
};
use sqlx::SqliteConnection;

/// What the machine's history and the task say when its owner's opt-out
/// stops a move before anything was done on the node.
const OPTED_OUT: &str =
    "not moved: its owner opted out of hot-GPU rebalancing after the move was queued; it stays on its GPUs";

/// Queues a rebalance task moving the machine to GPUs `to` (ids); `None`
/// when the machine is busy, opted out, or not running any more.
pub async fn queue(pool: &Pool, machine_id: i64, to: &[i64], why: &str) -> Result<Option<i64>, PlatformError> {
    let mut tx = begin(pool).await?;
    let cur = machine::current(&mut tx, machine_id).await?;
    let (owner, opted_out): (i64, bool) =
        sqlx::query_as("SELECT owner_id, rebalance_opt_out FROM machines WHERE id = ?")
            .bind(machine_id)
            .fetch_one(&mut *tx)
            .await?;
    if opted_out || accepts(&cur.name, cur.state, TaskKind::Rebalance).is_err() || busy(&mut tx, machine_id).await? {
        return Ok(None);
    }
    let task_id = task::insert_pending(
        &mut tx,
        &task::NewTask {
            kind: TaskKind::Rebalance,
            machine_id: Some(machine_id),
            machine_name: &cur.name,
            requester_id: owner,
            group_id: cur.group_id,
            keep_volume: true,
            message: "accepted",
        },
    )
    .await?;
    snapshot::set_payload(&mut tx, task_id, &serde_json::json!({ "to": to, "why": why })).await?;
    task::set_state(&mut tx, task_id, TaskState::Pending, TaskState::Scheduled, why).await?;
    audit::record(&mut *tx, None, "machine.rebalance", &format!("machine {}: {why}", cur.name)).await?;
    tx.commit().await?;
    Ok(Some(task_id))
}

/// Records why a hot machine was not moved, once per reason in a row.
pub async fn refused(pool: &Pool, machine_id: i64, reason: &str) -> Result<bool, PlatformError> {
    let mut tx = begin(pool).await?;
    let last: Option<(String, String)> =
        sqlx::query_as("SELECT kind, detail FROM machine_events WHERE machine_id = ? ORDER BY id DESC LIMIT 1")
            .bind(machine_id)
            .fetch_optional(&mut *tx)
            .await?;
    if last.is_some_and(|(k, _)| k.parse() == Ok(MachineEventKind::RebalanceRefused)) {
        return Ok(false);
    }
    snapshot::event(&mut tx, machine_id, MachineEventKind::RebalanceRefused, reason).await?;
    audit::record(&mut *tx, None, "machine.rebalance_refused", &format!("machine #{machine_id}: {reason}")).await?;
    tx.commit().await?;
    Ok(true)
}

/// Moves the machine's GPUs to `to`. Idempotent (a resumed task finds them
/// moved); refused, changing nothing, when a target was taken meanwhile or
/// is not on the machine's node. The count is unchanged, so is the quota.
pub async fn swap(pool: &Pool, lease: &Lease, machine_id: i64, to: &[i64]) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    let mut held: Vec<i64> = sqlx::query_scalar("SELECT gpu_id FROM machine_gpus WHERE machine_id = ? ORDER BY gpu_id")
        .bind(machine_id)
        .fetch_all(&mut *tx)
        .await?;
    let mut wanted = to.to_vec();
    wanted.sort_unstable();
    held.sort_unstable();
    if held == wanted {
        return Ok(());
    }
    if wanted.len() != held.len() {
        return Err(PlatformError::Conflict(format!(
            "the move names {} GPU(s); the machine holds {}",
            wanted.len(),
            held.len()
        )));
    }
    for gpu in &wanted {
        let (on_node, holder): (bool, Option<i64>) = sqlx::query_as(
            // A GPU its node stopped reporting since the move was planned is
            // no target, nor one a closed machine's left container may hold.
            "SELECT EXISTS (SELECT 1 FROM gpus g JOIN machines m ON m.node_id = g.node_id WHERE g.id = ?1 AND m.id = ?2
                              AND g.id NOT IN (SELECT gpu_id FROM gpus_gone) AND g.id NOT IN (SELECT gpu_id FROM gpus_left_to_collector)),
                    (SELECT machine_id FROM machine_gpus WHERE gpu_id = ?1)",
        )
        .bind(gpu)
        .bind(machine_id)
        .fetch_one(&mut *tx)
        .await?;
        if !on_node || holder.is_some_and(|h| h != machine_id) {
            return Err(PlatformError::Conflict(format!("GPU #{gpu} is no longer free on the machine's node")));
        }
    }
    sqlx::query("DELETE FROM machine_gpus WHERE machine_id = ?").bind(machine_id).execute(&mut *tx).await?;
    // A gone GPU given up goes, as when its machine releases it: never offered, it would only linger.
    sqlx::query("DELETE FROM gpus WHERE id IN (SELECT gpu_id FROM gpus_gone) AND id NOT IN (SELECT gpu_id FROM machine_gpus) AND node_id = (SELECT node_id FROM machines WHERE id = ?)")
        .bind(machine_id)
        .execute(&mut *tx)
        .await?;
    for gpu in &wanted {
        sqlx::query("INSERT INTO machine_gpus (gpu_id, machine_id) VALUES (?, ?)")
            .bind(gpu)
            .bind(machine_id)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query("UPDATE machines SET rev = rev + 1 WHERE id = ?").bind(machine_id).execute(&mut *tx).await?;
    audit::record(&mut *tx, None, "machine.gpus_moved", &format!("machine #{machine_id}: GPUs {held:?} → {wanted:?}"))
        .await?;
    tx.commit().await?;
    Ok(())
}

/// The move finished: the event says why, with the numbers.
pub async fn done(pool: &Pool, lease: &Lease, machine_id: i64, why: &str) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    snapshot::event(&mut tx, machine_id, MachineEventKind::Rebalanced, why).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Succeeded, why).await?;
    tx.commit().await?;
    Ok(())
}

/// The owner opted out: the machine's move that no runner has claimed yet
/// (nothing was done on the node) is cancelled in the caller's transaction
/// and the machine's history says so; its id.
pub(crate) async fn cancel_queued(conn: &mut SqliteConnection, machine_id: i64) -> Result<Option<i64>, PlatformError> {
    let last = task::cancel_unclaimed(conn, machine_id, TaskKind::Rebalance, OPTED_OUT).await?.pop();
    if last.is_some() {
        snapshot::event(conn, machine_id, MachineEventKind::RebalanceRefused, OPTED_OUT).await?;
    }
    Ok(last)
}

/// Asked by the move's runner, under its lease, while the machine's
/// container still runs on the GPUs it had (`to` not taken yet): has its
/// owner opted out since the move was queued? Then the task ends here,
/// `succeeded` with "not moved", and the machine shows running again;
/// `true`. Once the container is gone or the GPUs are swapped the move is
/// half made and finishes.
pub async fn call_off_if_opted_out(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    to: &[i64],
) -> Result<bool, PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    let opted_out: bool = sqlx::query_scalar("SELECT rebalance_opt_out FROM machines WHERE id = ?")
        .bind(machine_id)
        .fetch_one(&mut *tx)
        .await?;
    let mut held: Vec<i64> = sqlx::query_scalar("SELECT gpu_id FROM machine_gpus WHERE machine_id = ?")
        .bind(machine_id)
        .fetch_all(&mut *tx)
        .await?;
    let mut wanted = to.to_vec();
    held.sort_unstable();
    wanted.sort_unstable();
    if !opted_out || held == wanted {
        return Ok(false);
    }
    machine::move_to(&mut tx, machine_id, MachineState::Running, None, "").await?;
    snapshot::event(&mut tx, machine_id, MachineEventKind::RebalanceRefused, OPTED_OUT).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Succeeded, OPTED_OUT).await?;
    audit::record(
        &mut *tx,
        None,
        "machine.rebalance_called_off",
        &format!("machine #{machine_id}, task #{}: {OPTED_OUT}", lease.task_id),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}
