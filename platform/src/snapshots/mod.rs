//! Snapshots of dev machines: a machine's container committed to an image
//! tag on its node's engine (the data volume is not part of it). Users
//! take, list and delete them (within the group's snapshot quota) and make
//! a new machine, or reinstall one, from them. Idle reclaim takes one too:
//! the machine's restore point, which only its restore uses and the
//! reconciler's sweep deletes once the machine no longer needs it.
//! Another group's snapshots are "not found".

mod create;
mod delete;
mod sweep;

pub use create::{create_machine, reinstall_from};
pub use delete::delete;
pub use sweep::{sweep_reclaim, Swept};

use crate::{
    accounts::User,
    audit,
    db::Pool,
    machines::visibility,
    transitions::{self, reclaim::busy, snapshot, task},
    PlatformError,
};
use gantry_core::{
    snapshot::{SnapshotOrigin, SnapshotState},
    task::{accepts, TaskKind, TaskState, Workload},
};
use serde::{Deserialize, Serialize};

/// A snapshot as the portal lists it. `owner_id`: the viewer's own (or the
/// viewer is an admin, see [`User::acts_for`]) is the only one a machine can
/// be made from or that can be deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct SnapshotView {
    pub id: i64,
    pub name: String,
    pub image_ref: String,
    pub machine_id: i64,
    pub machine_name: String,
    pub node: Option<String>,
    pub owner: String,
    pub owner_id: i64,
    pub parent_id: Option<i64>,
    #[sqlx(try_from = "String")]
    pub origin: SnapshotOrigin,
    #[sqlx(try_from = "String")]
    pub state: SnapshotState,
    pub size_bytes: i64,
    pub message: String,
    pub created_at: i64,
}

/// The most snapshots [`list`] answers.
pub const LIST_MAX: usize = 500;

const SELECT: &str = "SELECT s.id, s.name, s.image_ref, s.machine_id, s.machine_name, n.name AS node, u.username AS owner, s.owner_id, s.parent_id,
                             s.origin, s.state, s.size_bytes, s.message, s.created_at
                      FROM snapshots s JOIN users u ON u.id = s.owner_id LEFT JOIN nodes n ON n.id = s.node_id";

/// The newest [`LIST_MAX`] snapshots the viewer may see: the quota bounds
/// only ready ones, and failed ones stay (with why) until deleted.
pub async fn list(pool: &Pool, viewer: &User) -> Result<Vec<SnapshotView>, PlatformError> {
    let (cond, bind) = visibility(viewer, "s.group_id");
    Ok(sqlx::query_as(&format!("{SELECT} WHERE ({cond}) ORDER BY s.id DESC LIMIT {LIST_MAX}"))
        .bind(bind)
        .fetch_all(pool)
        .await?)
}

/// One machine's snapshots that the viewer may see, newest first (its
/// page's card); another group's machine has none to show.
pub async fn list_for_machine(pool: &Pool, viewer: &User, machine_id: i64) -> Result<Vec<SnapshotView>, PlatformError> {
    let (cond, bind) = visibility(viewer, "s.group_id");
    Ok(sqlx::query_as(&format!("{SELECT} WHERE s.machine_id = ? AND ({cond}) ORDER BY s.id DESC"))
        .bind(machine_id)
        .bind(bind)
        .fetch_all(pool)
        .await?)
}

/// One snapshot the viewer may see; another group's is "not found".
pub async fn get(pool: &Pool, viewer: &User, id: i64) -> Result<SnapshotView, PlatformError> {
    let (cond, bind) = visibility(viewer, "s.group_id");
    sqlx::query_as(&format!("{SELECT} WHERE s.id = ? AND ({cond})"))
        .bind(id)
        .bind(bind)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| PlatformError::NotFound("snapshot".into()))
}

/// How many snapshots the group keeps against its quota, and the quota.
/// Reclaim snapshots are the system's doing and do not count: nothing but
/// their machine's restore uses them, and the sweep deletes them. Failed
/// ones neither — except one being deleted (marked failed meanwhile): the
/// engine may refuse, and it is back.
pub async fn usage(conn: &mut sqlx::SqliteConnection, group_id: i64) -> Result<(i64, i64), PlatformError> {
    Ok(sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM snapshots WHERE group_id = ?1 AND origin = 'user' AND (state <> 'failed' OR message = ?2)), snapshot_quota
         FROM groups WHERE id = ?1",
    )
    .bind(group_id)
    .bind(delete::DELETING)
    .fetch_one(&mut *conn)
    .await?)
}

/// Bytes the group's snapshots take (the images' sizes as the engine
/// reported them at commit; counted as [`usage`] counts them) and its
/// snapshot storage limit in MB (0: none).
pub async fn bytes_usage(conn: &mut sqlx::SqliteConnection, group_id: i64) -> Result<(i64, i64), PlatformError> {
    Ok(sqlx::query_as(
        "SELECT (SELECT COALESCE(SUM(size_bytes), 0) FROM snapshots WHERE group_id = ?1 AND origin = 'user' AND (state <> 'failed' OR message = ?2)), snapshot_disk_mb
         FROM groups WHERE id = ?1",
    )
    .bind(group_id)
    .bind(delete::DELETING)
    .fetch_one(&mut *conn)
    .await?)
}

/// A compute task's machine is the task's: a snapshot of it (or a machine
/// made or reinstalled from one) would turn a region image the group may
/// not choose into a long-lived dev machine, and hold the task's watcher
/// off while it runs. Admins may (to keep evidence of a job). Nobody
/// reinstalls the job's machine itself (see `create::reinstall_from`).
pub(crate) fn refuse_job_machine(who: &User, workload: Workload) -> Result<(), PlatformError> {
    if workload == Workload::Job && !who.role.is_admin() {
        return Err(PlatformError::Conflict("that machine runs (or ran) a compute task: only an admin can snapshot it, or make or reinstall a machine from its snapshots".into()));
    }
    Ok(())
}

/// The owner (or an admin) asks for a snapshot of a running or stopped
/// machine: a `creating` snapshot and its task, or a refusal that names
/// the rule (quota with the numbers, state, busy) and writes nothing.
pub async fn request(pool: &Pool, who: &User, machine_id: i64, name: &str) -> Result<(i64, i64), PlatformError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(PlatformError::BadRequest("a snapshot name is 1 to 64 printable characters".into()));
    }
    let mut tx = transitions::begin(pool).await?;
    let (cond, bind) = visibility(who, "group_id");
    let (owner, workload): (i64, String) =
        sqlx::query_as(&format!("SELECT owner_id, workload FROM machines WHERE id = ? AND ({cond})"))
            .bind(machine_id)
            .bind(bind)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict("only the machine's owner, or an admin, can snapshot it".into()));
    }
    refuse_job_machine(who, workload.parse()?)?;
    let cur = transitions::machine::current(&mut tx, machine_id).await?;
    accepts(&cur.name, cur.state, TaskKind::Snapshot).map_err(PlatformError::Conflict)?;
    if busy(&mut tx, machine_id).await? {
        return Err(PlatformError::Conflict(format!(
            "machine {} is busy with another operation; wait for it to finish",
            cur.name
        )));
    }
    let (used, quota) = usage(&mut tx, cur.group_id).await?;
    if used >= quota {
        return Err(PlatformError::Refused(format!(
            "the group keeps {used} of its {quota} snapshot(s); delete one first"
        )));
    }
    // Bytes too: one snapshot of a machine that filled its disk is as
    // heavy as many. What the machine wrote outside /data (the disk
    // watcher's last reading) is the least its image adds, so a snapshot
    // that would take the group past its limit is refused before it is
    // committed; the image's own size (with its base) is what then counts.
    let (bytes, limit_mb) = bytes_usage(&mut tx, cur.group_id).await?;
    let layer: i64 = sqlx::query_scalar("SELECT COALESCE(root_disk_bytes, 0) FROM machines WHERE id = ?")
        .bind(machine_id)
        .fetch_one(&mut *tx)
        .await?;
    if let Some(why) = gantry_core::disk::snapshot_refusal(bytes, layer, limit_mb) {
        return Err(PlatformError::Refused(why));
    }
    let (snapshot_id, reference) =
        snapshot::insert(&mut tx, &snapshot::NewSnapshot { name, machine_id, origin: SnapshotOrigin::User }).await?;
    let task_id = task::insert_pending(
        &mut tx,
        &task::NewTask {
            kind: TaskKind::Snapshot,
            machine_id: Some(machine_id),
            machine_name: &cur.name,
            requester_id: who.id,
            group_id: cur.group_id,
            keep_volume: false,
            message: "accepted",
        },
    )
    .await?;
    snapshot::set_payload(&mut tx, task_id, &serde_json::json!({ "snapshot_id": snapshot_id })).await?;
    task::set_state(&mut tx, task_id, TaskState::Pending, TaskState::Scheduled, "queued").await?;
    audit::record(
        &mut *tx,
        Some(who.id),
        "snapshot.request",
        &format!("snapshot {name} of machine {} ({reference})", cur.name),
    )
    .await?;
    tx.commit().await?;
    Ok((snapshot_id, task_id))
}
