//! Machine rows: state changes checked against the core's lifecycle, and
//! giving GPUs back (the only way a machine stops holding them).

use crate::{audit, now, PlatformError};
use gantry_core::{machine, task::MachineState};
use sqlx::SqliteConnection;

/// What a transaction knows about a machine before it changes it.
#[derive(Debug, Clone)]
pub struct Current {
    pub name: String,
    pub state: MachineState,
    pub rev: i64,
    pub gpu_count: i64,
    pub held: i64,
    pub group_id: i64,
    pub container_id: Option<String>,
}

pub async fn current(conn: &mut SqliteConnection, machine_id: i64) -> Result<Current, PlatformError> {
    let row: Option<(String, String, i64, i64, i64, i64, Option<String>)> = sqlx::query_as(
        "SELECT m.name, m.state, m.rev, m.gpu_count, (SELECT COUNT(*) FROM machine_gpus mg WHERE mg.machine_id = m.id),
                m.group_id, m.container_id
         FROM machines m WHERE m.id = ?",
    )
    .bind(machine_id)
    .fetch_optional(&mut *conn)
    .await?;
    let (name, state, rev, gpu_count, held, group_id, container_id) =
        row.ok_or_else(|| PlatformError::NotFound(format!("machine #{machine_id}")))?;
    let state = state.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string()))?;
    Ok(Current { name, state, rev, gpu_count, held, group_id, container_id })
}

/// Moves the machine to `to` (with the exit code and message that explain
/// it) if the core allows it from the state it is in; returns that state.
pub async fn move_to(
    conn: &mut SqliteConnection,
    machine_id: i64,
    to: MachineState,
    exit_code: Option<i64>,
    message: &str,
) -> Result<MachineState, PlatformError> {
    let cur = current(conn, machine_id).await?;
    machine::transition(cur.state, to).map_err(|e| PlatformError::Conflict(format!("machine {}: {e}", cur.name)))?;
    if machine::holds_nothing(to) && cur.held > 0 {
        return Err(PlatformError::Internal(format!(
            "machine {} would be {to} while holding GPUs; use release",
            cur.name
        )));
    }
    write_state(conn, machine_id, cur.rev, to, exit_code, message).await?;
    Ok(cur.state)
}

/// The compare-and-set itself: only if nobody wrote the row since `rev`.
/// A machine that fails, is being deleted or is closed (deleted, lost,
/// reclaimed) loses its idle warning here, in every path that gets it
/// there: otherwise its group's banner would count it down for ever.
async fn write_state(
    conn: &mut SqliteConnection,
    id: i64,
    rev: i64,
    to: MachineState,
    exit_code: Option<i64>,
    message: &str,
) -> Result<(), PlatformError> {
    let keeps_warning = matches!(
        to,
        MachineState::Running
            | MachineState::Stopped
            | MachineState::Restarting
            | MachineState::Reinstalling
            | MachineState::Creating
    );
    let done = sqlx::query(
        "UPDATE machines SET state = ?1, exit_code = ?2, message = ?3, updated_at = ?4, rev = rev + 1,
                reclaim_deadline = CASE WHEN ?7 THEN reclaim_deadline END, reclaim_extensions = CASE WHEN ?7 THEN reclaim_extensions ELSE 0 END
         WHERE id = ?5 AND rev = ?6",
    )
    .bind(to.as_str())
    .bind(exit_code)
    .bind(message)
    .bind(now())
    .bind(id)
    .bind(rev)
    .bind(keeps_warning)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != 1 {
        return Err(PlatformError::Conflict(format!("machine #{id} changed while it was being updated")));
    }
    Ok(())
}

/// What the reconciler saw, applied only if the row is still exactly as it
/// read it (same `rev`) and no task is working on the machine. `false`:
/// something moved on in between, so the observation is stale.
pub async fn observe_if_unchanged(
    conn: &mut SqliteConnection,
    machine_id: i64,
    rev: i64,
    to: MachineState,
    exit_code: Option<i64>,
    message: &str,
) -> Result<bool, PlatformError> {
    let cur = current(conn, machine_id).await?;
    let idle: bool = sqlx::query_scalar(
        "SELECT NOT EXISTS (SELECT 1 FROM tasks WHERE machine_id = ? AND state IN ('pending', 'scheduled', 'running'))",
    )
    .bind(machine_id)
    .fetch_one(&mut *conn)
    .await?;
    if cur.rev != rev || !idle || !machine::can_become(cur.state, to) {
        return Ok(false);
    }
    write_state(conn, machine_id, rev, to, exit_code, message).await?;
    Ok(true)
}

pub async fn set_container(
    conn: &mut SqliteConnection,
    machine_id: i64,
    container_id: Option<&str>,
) -> Result<(), PlatformError> {
    sqlx::query("UPDATE machines SET container_id = ?, updated_at = ?, rev = rev + 1 WHERE id = ?")
        .bind(container_id)
        .bind(now())
        .bind(machine_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

pub async fn set_volume_enforced(
    conn: &mut SqliteConnection,
    machine_id: i64,
    enforced: bool,
) -> Result<(), PlatformError> {
    sqlx::query("UPDATE machines SET volume_enforced = ?, rev = rev + 1 WHERE id = ?")
        .bind(enforced)
        .bind(machine_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Whether the container pinned to a machine's GPUs is known to be gone
/// when they are given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    Removed,
    /// The engine could not be asked: the collector removes it later.
    LeftToCollector,
}

/// [`release`], and when the container was left to the collector its GPUs
/// are listed in `gpus_left_to_collector`: the group is refunded now, but
/// the cards are offered to nobody until the collector has seen the node's
/// engine without that container ([`left_gpus_collected`]).
pub async fn release_as(
    conn: &mut SqliteConnection,
    machine_id: i64,
    to: MachineState,
    message: &str,
    container: Container,
) -> Result<i64, PlatformError> {
    if container == Container::LeftToCollector {
        sqlx::query("INSERT OR IGNORE INTO gpus_left_to_collector (gpu_id, machine_id, since) SELECT gpu_id, machine_id, ? FROM machine_gpus WHERE machine_id = ?")
            .bind(now())
            .bind(machine_id)
            .execute(&mut *conn)
            .await?;
    }
    release(conn, machine_id, to, message).await
}

/// The collector saw the node's engine without machine `machine_id`'s left
/// container: the GPUs it left become free again. Only rows still naming
/// that machine go, so a later leftover on the same card is not forgotten.
pub async fn left_gpus_collected(
    conn: &mut SqliteConnection,
    machine_id: i64,
    gpu_ids: &[i64],
) -> Result<u64, PlatformError> {
    let mut freed = 0;
    for gpu in gpu_ids {
        let gone = sqlx::query("DELETE FROM gpus_left_to_collector WHERE gpu_id = ? AND machine_id = ?")
            .bind(gpu)
            .bind(machine_id)
            .execute(&mut *conn)
            .await?;
        freed += gone.rows_affected();
    }
    if freed > 0 {
        audit::record(
            &mut *conn,
            None,
            "collect.gpus",
            &format!("machine #{machine_id}: its container is gone; {freed} GPU(s) may be offered again"),
        )
        .await?;
    }
    Ok(freed)
}

/// Gives back every GPU the machine holds, refunds its group, forgets its
/// container (the caller removes it, or leaves it to the collector) and
/// moves the machine to `to`. Returns the number of GPUs refunded;
/// idempotent for a machine that holds nothing. A GPU its node no longer
/// reports (in `gpus_gone`, kept only for this machine) is deleted, not
/// freed: nothing else may be given a card that is not there.
pub async fn release(
    conn: &mut SqliteConnection,
    machine_id: i64,
    to: MachineState,
    message: &str,
) -> Result<i64, PlatformError> {
    let cur = current(conn, machine_id).await?;
    machine::transition(cur.state, to).map_err(|e| PlatformError::Conflict(format!("machine {}: {e}", cur.name)))?;
    if cur.held > 0 {
        let gone: Vec<i64> = sqlx::query_scalar(
            "SELECT mg.gpu_id FROM machine_gpus mg JOIN gpus_gone x ON x.gpu_id = mg.gpu_id WHERE mg.machine_id = ?",
        )
        .bind(machine_id)
        .fetch_all(&mut *conn)
        .await?;
        // machine_gpus refers to gpus: the holding goes first.
        sqlx::query("DELETE FROM machine_gpus WHERE machine_id = ?").bind(machine_id).execute(&mut *conn).await?;
        for id in &gone {
            tracing::info!(machine_id, gpu_id = id, "a GPU its node no longer reports was let go; its row is removed");
            sqlx::query("DELETE FROM gpus WHERE id = ?").bind(id).execute(&mut *conn).await?;
        }
        let refunded =
            sqlx::query("UPDATE groups SET gpus_in_use = gpus_in_use - ?1 WHERE id = ?2 AND gpus_in_use >= ?1")
                .bind(cur.held)
                .bind(cur.group_id)
                .execute(&mut *conn)
                .await?;
        if refunded.rows_affected() != 1 {
            return Err(PlatformError::Internal(format!(
                "group #{} holds fewer GPUs than machine {} returns",
                cur.group_id, cur.name
            )));
        }
        audit::record(
            &mut *conn,
            None,
            "quota.refund",
            &format!("machine {}: {} GPU(s) returned ({to})", cur.name, cur.held),
        )
        .await?;
    }
    sqlx::query("UPDATE machines SET container_id = NULL WHERE id = ?").bind(machine_id).execute(&mut *conn).await?;
    write_state(conn, machine_id, cur.rev, to, None, message).await?;
    // A compute task running on this machine ends in the same commit.
    super::compute::machine_released(conn, machine_id, message).await?;
    Ok(cur.held)
}
