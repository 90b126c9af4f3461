//! The transitions a dispatcher makes while it executes a task, each one
//! fenced by the task's lease and committed together with its consequences.

use super::{
    lease::fenced,
    machine::{self, Container},
    task, Lease,
};
use crate::{audit, db::Pool, PlatformError};
use gantry_core::task::{machine_state_for, MachineState, TaskKind, TaskState};

/// Start of a claimed task: refuses to start a container for a machine
/// that does not hold all its GPUs, then shows what the task does. A
/// reinstall from a snapshot makes the snapshot's image the machine's
/// here, in the same commit: until it begins it can be cancelled, and the
/// machine must then be left on the image it had.
pub async fn begin(
    pool: &Pool,
    lease: &Lease,
    kind: TaskKind,
    machine_id: i64,
) -> Result<machine::Current, PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    let cur = machine::current(&mut tx, machine_id).await?;
    if matches!(
        kind,
        TaskKind::Create | TaskKind::Restart | TaskKind::Reinstall | TaskKind::Restore | TaskKind::Rebalance
    ) {
        gantry_core::machine::may_start(&cur.name, cur.held as u32, cur.gpu_count as u32)
            .map_err(PlatformError::Refused)?;
    }
    if let Some(showing) = machine_state_for(kind) {
        if cur.state != showing {
            machine::move_to(&mut tx, machine_id, showing, None, "").await?;
        }
    }
    if kind == TaskKind::Reinstall {
        let payload = super::snapshot::payload(&mut tx, lease.task_id).await?;
        if let (Some(image), Some(snapshot)) = (payload["image_id"].as_i64(), payload["from_snapshot_id"].as_i64()) {
            sqlx::query("UPDATE machines SET image_id = ?, from_snapshot_id = ? WHERE id = ?")
                .bind(image)
                .bind(snapshot)
                .bind(machine_id)
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(cur)
}

pub async fn container_created(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    container_id: &str,
) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    machine::set_container(&mut tx, machine_id, Some(container_id)).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn volume_ready(pool: &Pool, lease: &Lease, machine_id: i64, enforced: bool) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    machine::set_volume_enforced(&mut tx, machine_id, enforced).await?;
    tx.commit().await?;
    Ok(())
}

/// The container's real state, as the engine reported it.
/// The progress a create, restore, reinstall, restart or rebalance shows
/// once its container's state is recorded (every step before is lower).
pub const OBSERVED_PROGRESS: i64 = 95;

/// The container's state read into the machine; the task's progress says
/// so in the same commit, so a runner that stops before recording the
/// outcome leaves a task that [`outcome_observed`] tells apart: resumed, it
/// must not act again (the machine is no longer in the task's state, and
/// its container is the one this task made or restarted).
pub async fn observed(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    state: MachineState,
    exit_code: Option<i64>,
    message: &str,
) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    machine::move_to(&mut tx, machine_id, state, exit_code, message).await?;
    sqlx::query("UPDATE tasks SET progress = ? WHERE id = ?")
        .bind(OBSERVED_PROGRESS)
        .bind(lease.task_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Whether the task recorded its container's state before its runner
/// stopped: the machine's state is then the task's outcome, to be recorded
/// and not made again.
pub async fn outcome_observed(pool: &Pool, lease: &Lease) -> Result<bool, PlatformError> {
    let progress: i64 =
        sqlx::query_scalar("SELECT progress FROM tasks WHERE id = ?").bind(lease.task_id).fetch_one(pool).await?;
    Ok(progress >= OBSERVED_PROGRESS)
}

pub async fn succeed(pool: &Pool, lease: &Lease, message: &str) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Succeeded, message).await?;
    let (kind, machine_id): (String, Option<i64>) = sqlx::query_as("SELECT kind, machine_id FROM tasks WHERE id = ?")
        .bind(lease.task_id)
        .fetch_one(&mut *tx)
        .await?;
    match (kind.parse().unwrap_or(TaskKind::Snapshot), machine_id) {
        (TaskKind::Create, Some(machine_id)) => super::compute::machine_started(&mut tx, machine_id).await?,
        (TaskKind::Restore, Some(machine_id)) => {
            super::snapshot::event(&mut tx, machine_id, gantry_core::reclaim::MachineEventKind::Restored, message)
                .await?
        }
        _ => {}
    }
    tx.commit().await?;
    Ok(())
}

/// The engine could not be reached: back to `scheduled` until `not_before`.
pub async fn retry(pool: &Pool, lease: &Lease, not_before: i64, message: &str) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Scheduled, message).await?;
    sqlx::query("UPDATE tasks SET not_before = ? WHERE id = ?")
        .bind(not_before)
        .bind(lease.task_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// The task failed for good. `give_back`: the machine's GPUs are released
/// in the same commit (a create whose container the caller has removed, or
/// has left to the collector); `None`: the machine keeps them and shows
/// `failed` with the reason.
pub async fn fail(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    message: &str,
    give_back: Option<Container>,
) -> Result<i64, PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    let refunded = if let Some(container) = give_back {
        let held = machine::current(&mut tx, machine_id).await?.held;
        let shown = format!("{message}; {held} GPU(s) returned to the group's quota");
        machine::release_as(&mut tx, machine_id, MachineState::Failed, &shown, container).await?
    } else {
        machine::move_to(&mut tx, machine_id, MachineState::Failed, None, message).await?;
        0
    };
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Failed, message).await?;
    audit::record(&mut *tx, None, "task.failed", &format!("task #{}: {message}", lease.task_id)).await?;
    tx.commit().await?;
    Ok(refunded)
}

/// The end of a delete: GPUs back, machine closed, the volume listed as
/// kept when asked, task succeeded — one commit.
pub async fn deleted(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    keep_volume: bool,
    message: &str,
) -> Result<i64, PlatformError> {
    deleted_as(pool, lease, machine_id, keep_volume, message, Container::Removed).await
}

/// [`deleted`], for a delete that gave up on an unreachable engine: its
/// container is left to the collector, and so are its GPUs.
pub async fn deleted_leaving_container(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    keep_volume: bool,
    message: &str,
) -> Result<i64, PlatformError> {
    deleted_as(pool, lease, machine_id, keep_volume, message, Container::LeftToCollector).await
}

async fn deleted_as(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    keep_volume: bool,
    message: &str,
    container: Container,
) -> Result<i64, PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    if keep_volume {
        keep_machines_volume(&mut tx, machine_id, false).await?;
    }
    let refunded = machine::release_as(&mut tx, machine_id, MachineState::Deleted, message, container).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Succeeded, message).await?;
    let name: String =
        sqlx::query_scalar("SELECT name FROM machines WHERE id = ?").bind(machine_id).fetch_one(&mut *tx).await?;
    audit::record(&mut *tx, None, "machine.deleted", &format!("machine {name}: {message}")).await?;
    tx.commit().await?;
    // Its GPUs are the group's again: a start waiting for them begins now.
    if refunded > 0 {
        crate::schedules::serve_after(pool, "a delete").await;
    }
    Ok(refunded)
}

/// Lists the machine's volume under kept volumes (its node known). With
/// `only_if_was_kept`, only a volume the machine was made on — one taken
/// from the kept volumes, not its own new one (see `VOLUME_NAME_SQL`): a
/// cancelled create gives back the kept volume it took, and nothing else.
pub(crate) async fn keep_machines_volume(
    conn: &mut sqlx::SqliteConnection,
    machine_id: i64,
    only_if_was_kept: bool,
) -> Result<bool, PlatformError> {
    let was_kept = if only_if_was_kept {
        format!(" AND volume_name <> {}", crate::machines::VOLUME_NAME_SQL)
    } else {
        String::new()
    };
    let kept = sqlx::query(&format!(
        "INSERT INTO kept_volumes (name, node_id, owner_id, group_id, size_gb, enforced, from_machine, kept_at)
         SELECT volume_name, node_id, owner_id, group_id, volume_size_gb, volume_enforced, name, ?
         FROM machines WHERE id = ? AND node_id IS NOT NULL{was_kept}
         ON CONFLICT(name) DO NOTHING"
    ))
    .bind(crate::now())
    .bind(machine_id)
    .execute(&mut *conn)
    .await?;
    Ok(kept.rows_affected() == 1)
}
