//! Stop and start of a dev machine by its owner (or an admin). A stop is
//! the idle reclaim's task asked for by a person: the same runner commits
//! the container to a restore-point snapshot, removes it and gives the
//! GPUs back in one commit (the GPU⇔container rule kept by the same code),
//! but nothing calls it off — no warning, no deadline, no exemption is
//! asked. Its task's payload says `"stop": true`, and the machine is
//! marked `shut_down` when it ends, so the portal shows "shut down" and a
//! Start button. Start is the restore: admitted on the machine's node
//! (where its volume and snapshot are) within the group's quota, refused
//! with the numbers and nothing changed when there is no room.

use super::{busy, withdraw, Queued};
use crate::{accounts::User, audit, db::Pool, machines::visibility, transitions::begin, PlatformError};
use gantry_core::task::{accepts, TaskKind, Workload};
use sqlx::SqliteConnection;

/// Queues the stop of a running or stopped dev machine; the task's id. The
/// same stop asked for again answers the first one's task. A warning of
/// the idle reclaim is withdrawn (and a reclaim queued for it, not begun,
/// cancelled) in the same commit: the stop puts the machine away anyway.
pub async fn stop(pool: &Pool, who: &User, machine_id: i64) -> Result<i64, PlatformError> {
    stop_as(pool, who, machine_id, &format!("stopped by {}", who.username), Some(who.id)).await
}

/// [`stop`] on behalf of `who` (the owner, for a schedule), saying `by`
/// in its task, event and audit (`actor`: `None` for the platform).
pub(crate) async fn stop_as(
    pool: &Pool,
    who: &User,
    machine_id: i64,
    by: &str,
    actor: Option<i64>,
) -> Result<i64, PlatformError> {
    let mut tx = begin(pool).await?;
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(i64, String, String)> =
        sqlx::query_as(&format!("SELECT owner_id, workload, name FROM machines WHERE id = ? AND ({cond})"))
            .bind(machine_id)
            .bind(bind)
            .fetch_optional(&mut *tx)
            .await?;
    // Another group's machine is "not found", as for every operation.
    let (owner, workload, name) = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict(format!("only machine {name}'s owner, or an admin, can stop it")));
    }
    // A job's machine ends with its task; putting it away would hold the
    // task open with no GPUs and no way to run its command again.
    if workload.parse::<Workload>()? == Workload::Job {
        return Err(PlatformError::Conflict(format!(
            "machine {name} runs a compute task: it is not stopped; cancel the task instead (its machine goes with it)"
        )));
    }
    if let Some(task_id) = stop_in_flight(&mut tx, machine_id).await? {
        return Ok(task_id);
    }
    let cur = super::machine::current(&mut tx, machine_id).await?;
    accepts(&cur.name, cur.state, TaskKind::Reclaim).map_err(PlatformError::Conflict)?;
    if let Some(task_id) = withdraw::begun(&mut tx, machine_id).await? {
        return Err(PlatformError::Conflict(format!(
            "machine {name} is being reclaimed now (task #{task_id}): its GPUs are being returned already; \
             once that is done, start it from its page"
        )));
    }
    withdraw::withdraw(&mut tx, machine_id, by).await?;
    if busy(&mut tx, machine_id).await? {
        return Err(PlatformError::Conflict(format!(
            "machine {name} is busy with another operation; wait for it to finish"
        )));
    }
    let why =
        format!("{by}: its filesystem is saved, its container removed and its GPUs returned; Start brings it back");
    let payload = serde_json::json!({ "stop": true });
    let queued = Queued { machine_id, cur: &cur, requester: who.id, label: "stopped", payload, why: &why };
    let task_id = queued.insert(&mut tx).await?;
    audit::record(&mut *tx, actor, "machine.stop", &format!("machine {name}: {why}")).await?;
    tx.commit().await?;
    Ok(task_id)
}

/// Whether a reclaim task's payload is a person's stop.
pub fn is_stop(payload: &serde_json::Value) -> bool {
    payload.get("stop").and_then(|v| v.as_bool()).unwrap_or(false)
}

/// The machine's stop that has not ended (queued, running or waiting to
/// retry).
async fn stop_in_flight(conn: &mut SqliteConnection, machine_id: i64) -> Result<Option<i64>, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM tasks WHERE machine_id = ? AND kind = 'reclaim' AND state IN ('pending', 'scheduled', 'running')
           AND json_extract(payload, '$.stop') = 1 ORDER BY id LIMIT 1",
    )
    .bind(machine_id)
    .fetch_optional(&mut *conn)
    .await?)
}

/// Starts a shut-down machine: the restore, audited as `machine.start`.
pub async fn start(pool: &Pool, who: &User, machine_id: i64) -> Result<i64, PlatformError> {
    super::restore_as(pool, who, machine_id, "start", super::OnRefusal::Record).await
}
