//! Snapshot rows and the task writes that go with them: a snapshot is
//! `creating` while its task commits the container, then `ready` (with its
//! size) or `failed` — always in the commit that ends its task.

use super::{lease::fenced, task, Lease};
use crate::{audit, db::Pool, now, PlatformError};
use gantry_core::{reclaim::MachineEventKind, snapshot::SnapshotOrigin, task::TaskState};
use sqlx::SqliteConnection;

/// The image tag a snapshot is committed to: unique per installation, so
/// installations sharing an engine never overwrite each other's.
pub fn image_ref(instance: &str, snapshot_id: i64) -> String {
    format!("gantry-snap-{instance}:s{snapshot_id}")
}

pub struct NewSnapshot<'a> {
    pub name: &'a str,
    pub machine_id: i64,
    pub origin: SnapshotOrigin,
}

/// Inserts a `creating` snapshot of the machine (its node, owner, group;
/// parent = the snapshot the machine came from; base image = the one the
/// group's image rule applies to, see migration 0028). Returns (id, image ref).
pub async fn insert(conn: &mut SqliteConnection, s: &NewSnapshot<'_>) -> Result<(i64, String), PlatformError> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO snapshots (name, image_ref, machine_id, machine_name, node_id, owner_id, group_id, parent_id, base_image_id, origin, state, created_at)
         SELECT ?, 'pending-' || lower(hex(randomblob(8))), m.id, m.name, m.node_id, m.owner_id, m.group_id, m.from_snapshot_id,
                CASE WHEN i.internal = 0 THEN m.image_id ELSE (SELECT p.base_image_id FROM snapshots p WHERE p.id = m.from_snapshot_id) END,
                ?, 'creating', ?
         FROM machines m JOIN images i ON i.id = m.image_id WHERE m.id = ? RETURNING id",
    )
    .bind(s.name)
    .bind(s.origin.as_str())
    .bind(now())
    .bind(s.machine_id)
    .fetch_one(&mut *conn)
    .await?;
    let reference = image_ref(&crate::machines::instance_id(&mut *conn).await?, id);
    sqlx::query("UPDATE snapshots SET image_ref = ? WHERE id = ?")
        .bind(&reference)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    Ok((id, reference))
}

/// The (internal, never offered in the image list) image row a machine
/// made from a snapshot points to.
pub async fn image_row(conn: &mut SqliteConnection, reference: &str) -> Result<i64, PlatformError> {
    let name = format!("snapshot:{reference}");
    sqlx::query("INSERT INTO images (name, reference, description, is_default, internal, created_at) VALUES (?, ?, 'snapshot', 0, 1, ?) ON CONFLICT(name) DO NOTHING")
        .bind(&name)
        .bind(reference)
        .bind(now())
        .execute(&mut *conn)
        .await?;
    Ok(sqlx::query_scalar("SELECT id FROM images WHERE name = ?").bind(&name).fetch_one(&mut *conn).await?)
}

/// A task's JSON payload (what it works with beyond its machine).
pub async fn payload(conn: &mut SqliteConnection, task_id: i64) -> Result<serde_json::Value, PlatformError> {
    let text: String =
        sqlx::query_scalar("SELECT payload FROM tasks WHERE id = ?").bind(task_id).fetch_one(&mut *conn).await?;
    serde_json::from_str(&text).map_err(|e| PlatformError::Internal(format!("task #{task_id} payload: {e}")))
}

pub async fn set_payload(
    conn: &mut SqliteConnection,
    task_id: i64,
    payload: &serde_json::Value,
) -> Result<(), PlatformError> {
    sqlx::query("UPDATE tasks SET payload = ? WHERE id = ?")
        .bind(payload.to_string())
        .bind(task_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

pub(crate) async fn mark_ready(
    conn: &mut SqliteConnection,
    snapshot_id: i64,
    size_bytes: i64,
) -> Result<(), PlatformError> {
    sqlx::query("UPDATE snapshots SET state = 'ready', size_bytes = ?, message = '' WHERE id = ?")
        .bind(size_bytes)
        .bind(snapshot_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

pub async fn event(
    conn: &mut SqliteConnection,
    machine_id: i64,
    kind: MachineEventKind,
    detail: &str,
) -> Result<(), PlatformError> {
    sqlx::query("INSERT INTO machine_events (machine_id, at_ms, kind, detail) VALUES (?, ?, ?, ?)")
        .bind(machine_id)
        .bind(crate::telemetry::now_ms())
        .bind(kind.as_str())
        .bind(detail)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// A user's snapshot was committed: ready, task succeeded, one commit.
pub async fn taken(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    snapshot_id: i64,
    size_bytes: i64,
) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    mark_ready(&mut tx, snapshot_id, size_bytes).await?;
    let (name, reference): (String, String) = sqlx::query_as("SELECT name, image_ref FROM snapshots WHERE id = ?")
        .bind(snapshot_id)
        .fetch_one(&mut *tx)
        .await?;
    let message = format!("snapshot {name} taken ({reference}, {} MB)", size_bytes / 1_000_000);
    event(&mut tx, machine_id, MachineEventKind::Snapshot, &message).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Succeeded, &message).await?;
    audit::record(&mut *tx, None, "snapshot.taken", &format!("task #{}: {message}", lease.task_id)).await?;
    tx.commit().await?;
    Ok(())
}

/// The snapshot of a task that ended without running (cancelled) fails
/// with it, so it is not shown as being taken for ever.
pub async fn task_ended(conn: &mut SqliteConnection, task_id: i64, why: &str) -> Result<(), PlatformError> {
    if let Some(id) = payload(conn, task_id).await?.get("snapshot_id").and_then(|v| v.as_i64()) {
        sqlx::query("UPDATE snapshots SET state = 'failed', message = ? WHERE id = ? AND state = 'creating'")
            .bind(why)
            .bind(id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// A snapshot (or the reclaim that takes one) failed for good: the task
/// fails and its snapshot with it; the machine stays as it was.
pub async fn failed(pool: &Pool, lease: &Lease, message: &str) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    task_ended(&mut tx, lease.task_id, message).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Failed, message).await?;
    audit::record(&mut *tx, None, "task.failed", &format!("task #{}: {message}", lease.task_id)).await?;
    tx.commit().await?;
    Ok(())
}
