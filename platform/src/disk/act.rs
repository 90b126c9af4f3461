//! What the disk watcher writes: each reading, the owner's warning, and a
//! stop with its reason — state changes through `transitions`.

use super::Watched;
use crate::{
    audit,
    executor::{ContainerStatus, ExecError, Executor},
    now,
    transitions::{self, snapshot::event},
    PlatformError,
};
use gantry_core::{
    disk::{stopped_text, warning_text},
    reclaim::MachineEventKind,
    task::MachineState,
};

/// The latest reading, for the machine's page; only while the machine
/// still runs that container (a reinstall since made another).
pub(super) async fn record_reading(pool: &crate::db::Pool, m: &Watched, used: i64) -> Result<(), PlatformError> {
    sqlx::query("UPDATE machines SET root_disk_bytes = ?, root_disk_at = ? WHERE id = ? AND container_id = ?")
        .bind(used)
        .bind(now())
        .bind(m.id)
        .bind(&m.container_id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Back under the warning share: a later rise warns again.
pub(super) async fn clear_warning(pool: &crate::db::Pool, m: &Watched) -> Result<(), PlatformError> {
    sqlx::query("UPDATE machines SET root_disk_warned = 0 WHERE id = ?").bind(m.id).execute(pool).await?;
    Ok(())
}

/// Written once per rise: an event in the machine's history, which its
/// page shows; the words for the report.
pub(super) async fn warn(pool: &crate::db::Pool, m: &Watched, used: i64) -> Result<String, PlatformError> {
    let text = warning_text(used, m.limit_mb);
    let mut tx = transitions::begin(pool).await?;
    let first = sqlx::query("UPDATE machines SET root_disk_warned = 1 WHERE id = ? AND root_disk_warned = 0")
        .bind(m.id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
        == 1;
    if first {
        event(&mut tx, m.id, MachineEventKind::DiskWarning, &text).await?;
        audit::record(&mut *tx, None, "machine.disk_warning", &format!("machine {}: {text}", m.name)).await?;
    }
    tx.commit().await?;
    Ok(format!("machine {}: {text}", m.name))
}

/// Stops a machine over its limit and says why. A dev machine is marked
/// stopped with the reason (only if its row is as the pass read it: an
/// operation that began meanwhile wins); a compute task's machine has the
/// reason recorded on its task first, so the compute watcher ends the task
/// failed with it even if this pass is cut off after the stop. `None` when
/// the container was gone already.
pub(super) async fn stop(
    pool: &crate::db::Pool,
    exec: &Executor,
    m: &Watched,
    used: i64,
) -> Result<Option<String>, String> {
    let db = |e: PlatformError| e.to_string();
    let why = stopped_text(used, m.limit_mb);
    if m.is_job {
        let mut tx = transitions::begin(pool).await.map_err(db)?;
        transitions::compute::stopping_for_disk(&mut tx, m.id, &why).await.map_err(db)?;
        tx.commit().await.map_err(|e| e.to_string())?;
    }
    match exec.stop_container(&m.container_id).await {
        Ok(()) => {}
        Err(ExecError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let code = match exec.inspect_container(&m.container_id).await {
        Ok(s) => match s.status {
            ContainerStatus::Exited { code } => Some(code),
            _ => None,
        },
        Err(_) => None,
    };
    let mut tx = transitions::begin(pool).await.map_err(db)?;
    if !m.is_job {
        // `false`: something moved on since the read; the reconciler then
        // records the exit as it finds it.
        transitions::machine::observe_if_unchanged(&mut tx, m.id, m.rev, MachineState::Stopped, code, &why)
            .await
            .map_err(db)?;
    }
    sqlx::query("UPDATE machines SET root_disk_warned = 0 WHERE id = ?")
        .bind(m.id)
        .execute(&mut *tx)
        .await
        .map_err(|e| e.to_string())?;
    event(&mut tx, m.id, MachineEventKind::DiskStopped, &why).await.map_err(db)?;
    audit::record(&mut *tx, None, "machine.disk_stopped", &format!("machine {}: {why}", m.name)).await.map_err(db)?;
    tx.commit().await.map_err(|e| e.to_string())?;
    Ok(Some(format!("machine {}: {why}", m.name)))
}
