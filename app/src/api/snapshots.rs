//! Snapshots: list (the viewer's group; admins all), take, delete, and
//! machines from them. Another group's snapshot is "not found" (404).

use crate::error::AppError;
use gantry_platform::snapshots::SnapshotView;
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "list_snapshots")]
pub async fn list_snapshots() -> Result<Vec<SnapshotView>, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::snapshots::list(&crate::state::pool()?, &user).await?)
}

/// One machine's snapshots (its page's card), newest first.
#[server(prefix = "/api", endpoint = "machine_snapshots")]
pub async fn machine_snapshots(machine_id: i64) -> Result<Vec<SnapshotView>, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::snapshots::list_for_machine(&crate::state::pool()?, &user, machine_id).await?)
}

/// Takes a snapshot of the machine; returns the snapshot's id.
#[server(prefix = "/api", endpoint = "take_snapshot")]
pub async fn take_snapshot(machine_id: i64, name: String) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    let (id, _) = gantry_platform::snapshots::request(&crate::state::pool()?, &user, machine_id, &name).await?;
    crate::state::wake_dispatcher();
    Ok(id)
}

#[server(prefix = "/api", endpoint = "delete_snapshot")]
pub async fn delete_snapshot(snapshot_id: i64) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let s = crate::state::state()?;
    Ok(gantry_platform::snapshots::delete(&s.pool, &s.fleet, &user, snapshot_id).await?)
}

/// A new machine from the snapshot (on the snapshot's node); returns its id.
#[server(prefix = "/api", endpoint = "machine_from_snapshot")]
pub async fn machine_from_snapshot(
    snapshot_id: i64,
    name: String,
    gpu_count: String,
    volume_size_gb: String,
) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    let invalid = |m: String| AppError::Invalid(m).respond();
    // The refusal quotes what was sent, cut short: it may travel in a URL
    // and show on a page (see `form_errors`).
    let quoted = |s: &str| s.trim().chars().take(16).collect::<String>();
    let gpus: u32 = gpu_count
        .trim()
        .parse()
        .map_err(|_| invalid(format!("GPU count: \"{}\" is not a number", quoted(&gpu_count))))?;
    let size: i64 = volume_size_gb
        .trim()
        .parse()
        .map_err(|_| invalid(format!("volume size: \"{}\" is not a number", quoted(&volume_size_gb))))?;
    let req = gantry_platform::machines::CreateMachine::new(user, name.trim(), gpus, size);
    let admitted = gantry_platform::snapshots::create_machine(&crate::state::pool()?, req, snapshot_id).await?;
    crate::state::wake_dispatcher();
    Ok(admitted.machine_id)
}

/// Reinstalls the machine from the snapshot (same data volume); returns the task id.
#[server(prefix = "/api", endpoint = "reinstall_from_snapshot")]
pub async fn reinstall_from_snapshot(machine_id: i64, snapshot_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    let task =
        gantry_platform::snapshots::reinstall_from(&crate::state::pool()?, &user, machine_id, snapshot_id).await?;
    crate::state::wake_dispatcher();
    Ok(task)
}
