//! Operations on existing machines (restart, reinstall, delete) and the
//! bookkeeping the dispatcher shares: progress, and giving GPUs back.

use super::visibility;
use crate::{accounts::User, audit, db::Pool, now, PlatformError};
use gantry_core::task::{accepts, MachineState, TaskKind};
use sqlx::SqliteConnection;

#[derive(Debug, Clone)]
pub struct OperationRequest {
    pub machine_id: i64,
    pub kind: TaskKind,
    /// Delete only: keep the data volume.
    pub keep_volume: bool,
}

/// Queues an operation on a machine the requester may touch. Refused when
/// the machine's state does not accept it or another operation is queued.
pub async fn request_operation(pool: &Pool, requester: &User, op: OperationRequest) -> Result<i64, PlatformError> {
    if matches!(op.kind, TaskKind::Create | TaskKind::Snapshot) {
        return Err(PlatformError::BadRequest(format!("{} is not an operation on an existing machine", op.kind)));
    }
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let (cond, bind) = visibility(requester, "group_id");
    let row: Option<(String, String, i64)> = sqlx::query_as(&format!("SELECT name, state, group_id FROM machines WHERE id = ? AND ({cond})"))
        .bind(op.machine_id)
        .bind(bind)
        .fetch_optional(&mut *tx)
        .await?;
    // Another group's machine is "not found": its existence is not ours to know.
    let (name, state, group_id) = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    let state: MachineState = state.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string()))?;
    accepts(&name, state, op.kind).map_err(PlatformError::Conflict)?;
    let busy: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE machine_id = ? AND state IN ('pending', 'scheduled', 'running')")
        .bind(op.machine_id)
        .fetch_one(&mut *tx)
        .await?;
    if busy > 0 {
        return Err(PlatformError::Conflict(format!("machine {name} is busy with another operation; wait for it to finish")));
    }
    let now = now();
    let task_id: i64 = sqlx::query_scalar(
        "INSERT INTO tasks (kind, machine_id, machine_name, requester_id, group_id, state, progress, message, keep_volume, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'scheduled', 0, 'queued', ?, ?, ?) RETURNING id",
    )
    .bind(op.kind.as_str())
    .bind(op.machine_id)
    .bind(&name)
    .bind(requester.id)
    .bind(group_id)
    .bind(op.keep_volume)
    .bind(now)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let detail = if op.kind == TaskKind::Delete && op.keep_volume {
        format!("{} machine {name} (keeping its volume)", op.kind)
    } else {
        format!("{} machine {name}", op.kind)
    };
    audit::record(&mut *tx, Some(requester.id), &format!("machine.{}", op.kind), &detail).await?;
    tx.commit().await?;
    Ok(task_id)
}

pub async fn set_task_progress(pool: &Pool, task_id: i64, progress: i64, message: &str) -> Result<(), PlatformError> {
    sqlx::query("UPDATE tasks SET progress = ?, message = ?, updated_at = ? WHERE id = ?")
        .bind(progress.clamp(0, 100))
        .bind(message)
        .bind(now())
        .bind(task_id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Frees the GPUs a machine holds and refunds its group's quota, inside the
/// caller's transaction. Idempotent: a machine holding nothing refunds 0.
pub async fn release_gpus(conn: &mut SqliteConnection, machine_id: i64) -> Result<i64, PlatformError> {
    let held: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = ?").bind(machine_id).fetch_one(&mut *conn).await?;
    if held > 0 {
        sqlx::query("DELETE FROM machine_gpus WHERE machine_id = ?").bind(machine_id).execute(&mut *conn).await?;
        sqlx::query("UPDATE groups SET gpus_in_use = gpus_in_use - ? WHERE id = (SELECT group_id FROM machines WHERE id = ?)")
            .bind(held)
            .bind(machine_id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(held)
}
