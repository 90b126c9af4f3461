//! Task rows: written `pending`, moved only along the core's edges, and
//! cancelled before they start.

use super::{begin, lease::Lease, machine, Tx};
use crate::{accounts::User, audit, db::Pool, machines::visibility, now, PlatformError};
use gantry_core::task::{transition, MachineState, TaskKind, TaskState};
use sqlx::SqliteConnection;

pub struct NewTask<'a> {
    pub kind: TaskKind,
    pub machine_id: Option<i64>,
    pub machine_name: &'a str,
    pub requester_id: i64,
    pub group_id: i64,
    pub keep_volume: bool,
    pub message: &'a str,
}

/// Inserts a task in `pending`, the state every task starts in.
pub async fn insert_pending(conn: &mut SqliteConnection, t: &NewTask<'_>) -> Result<i64, PlatformError> {
    let now = now();
    Ok(sqlx::query_scalar(
        "INSERT INTO tasks (kind, machine_id, machine_name, requester_id, group_id, state, progress, message, keep_volume, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?) RETURNING id",
    )
    .bind(t.kind.as_str())
    .bind(t.machine_id)
    .bind(t.machine_name)
    .bind(t.requester_id)
    .bind(t.group_id)
    .bind(t.message)
    .bind(t.keep_volume)
    .bind(now)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?)
}

/// Compare-and-set of a task's state along an edge the core allows.
/// Leaving `running` drops the lease; succeeding sets progress to 100.
pub async fn set_state(
    conn: &mut SqliteConnection,
    task_id: i64,
    from: TaskState,
    to: TaskState,
    message: &str,
) -> Result<(), PlatformError> {
    transition(from, to).map_err(|e| PlatformError::Internal(format!("task #{task_id}: {e}")))?;
    let done = sqlx::query(
        "UPDATE tasks SET state = ?1, message = ?2, updated_at = ?3,
                progress = CASE WHEN ?1 = 'succeeded' THEN 100 ELSE progress END,
                lease_owner = CASE WHEN ?1 = 'running' THEN lease_owner ELSE NULL END,
                lease_expires = CASE WHEN ?1 = 'running' THEN lease_expires ELSE 0 END
         WHERE id = ?4 AND state = ?5",
    )
    .bind(to.as_str())
    .bind(message)
    .bind(now())
    .bind(task_id)
    .bind(from.as_str())
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != 1 {
        return Err(PlatformError::Conflict(format!("task #{task_id} is no longer {from}")));
    }
    Ok(())
}

/// Progress of a running task, fenced by its lease.
pub async fn progress(pool: &Pool, lease: &Lease, pct: i64, message: &str) -> Result<(), PlatformError> {
    let mut tx: Tx = super::lease::fenced(pool, lease).await?;
    sqlx::query("UPDATE tasks SET progress = ?, message = ?, updated_at = ? WHERE id = ?")
        .bind(pct.clamp(0, 100))
        .bind(message)
        .bind(now())
        .bind(lease.task_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Cancels a task that has not started, for its requester or an admin (a
/// task of another group is "not found"). A cancelled create closes its
/// machine and refunds the GPUs it was given — unless its container was
/// already made (its start is being retried): then the machine is deleted
/// through the engine, and its GPUs come back only once that container is
/// gone. A delete that has already begun is refused (see
/// [`refuse_begun_delete`]). Any other cancelled operation leaves the
/// machine as it was.
pub async fn cancel(pool: &Pool, who: &User, task_id: i64) -> Result<(), PlatformError> {
    let mut tx = begin(pool).await?;
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(String, String, Option<i64>, i64, String, i64)> = sqlx::query_as(&format!(
        "SELECT kind, state, machine_id, requester_id, machine_name, attempts FROM tasks WHERE id = ? AND ({cond})"
    ))
    .bind(task_id)
    .bind(bind)
    .fetch_optional(&mut *tx)
    .await?;
    let (kind, state, machine_id, requester_id, machine_name, attempts) =
        row.ok_or_else(|| PlatformError::NotFound("task".into()))?;
    if requester_id != who.id && !who.role.is_admin() {
        return Err(PlatformError::Conflict("only the person who asked for a task, or an admin, can cancel it".into()));
    }
    let parsed = kind.parse::<TaskKind>().ok();
    let on_job = match machine_id {
        Some(id) => {
            sqlx::query_scalar::<_, String>("SELECT workload FROM machines WHERE id = ?")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .map(|w| w.parse::<gantry_core::task::Workload>())
                .transpose()?
                == Some(gantry_core::task::Workload::Job)
        }
        None => false,
    };
    // A stop is its owner's own request (a reclaim task only by its runner):
    // not yet begun, they may call it off like any task of theirs.
    let stop = parsed == Some(TaskKind::Reclaim)
        && super::reclaim::is_stop(&super::snapshot::payload(&mut tx, task_id).await?);
    if !stop {
        refuse_system_task(who, task_id, parsed, on_job)?;
    }
    let state: TaskState =
        state.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string()))?;
    state
        .cancellable()
        .map_err(|why| PlatformError::Conflict(format!("task #{task_id} cannot be cancelled: {why}")))?;
    // A create or restore waiting to retry may already have made its
    // container. Freeing its GPUs now would hand out a GPU that container
    // is pinned to, so the container must go first.
    if parsed == Some(TaskKind::Delete) {
        refuse_begun_delete(&mut tx, task_id, machine_id, &machine_name, attempts).await?;
    }
    // A reclaim back in the queue after an attempt may have removed the
    // container already: cancelling would leave a machine without one.
    if parsed == Some(TaskKind::Reclaim) && attempts > 0 {
        return Err(PlatformError::Conflict(format!(
            "task #{task_id} cannot be cancelled: the reclaim of machine {machine_name} has already begun on its node and is waiting to retry; \
             it finishes by itself (exempting the machine stops it before its container is removed, if it still can be)"
        )));
    }
    // A restart, reinstall or move back in the queue after an attempt left
    // its machine `restarting` or `reinstalling` (and maybe without a
    // container): no operation is accepted from there, so cancelling would
    // strand the machine with its GPUs.
    if let (Some(kind @ (TaskKind::Restart | TaskKind::Reinstall | TaskKind::Rebalance)), true) = (parsed, attempts > 0)
    {
        return Err(PlatformError::Conflict(format!(
            "task #{task_id} cannot be cancelled: the {kind} of machine {machine_name} has already begun on its node and is waiting to retry; \
             it finishes by itself once the node's engine answers (or after its last retry the machine shows failed, and can be reinstalled or deleted)"
        )));
    }
    let container = match (parsed, machine_id) {
        (Some(TaskKind::Create | TaskKind::Restore), Some(machine_id)) => {
            sqlx::query_scalar::<_, Option<String>>("SELECT container_id FROM machines WHERE id = ?")
                .bind(machine_id)
                .fetch_optional(&mut *tx)
                .await?
                .flatten()
        }
        _ => None,
    };
    if container.is_some() && parsed == Some(TaskKind::Restore) {
        return Err(PlatformError::Conflict(format!(
            "task #{task_id} cannot be cancelled: machine {machine_name}'s container was already created from its snapshot and its start is being retried; \
             if it keeps failing the restore ends by itself and the machine is reclaimed again"
        )));
    }
    let by = format!("cancelled by {}", who.username);
    set_state(&mut tx, task_id, state, TaskState::Cancelled, &by).await?;
    let cancelled = Cancelled { id: task_id, kind: parsed, word: &kind, machine_id, machine_name: &machine_name };
    let detail = cancelled.undo(&mut tx, who, container.is_some(), &by).await?;
    audit::record(&mut *tx, Some(who.id), "task.cancel", &detail).await?;
    tx.commit().await?;
    Ok(())
}

/// A task just moved to `cancelled` (it had not started: see
/// [`TaskState::cancellable`]), and what that undoes.
pub(crate) struct Cancelled<'a> {
    pub id: i64,
    pub kind: Option<TaskKind>,
    /// The kind as stored (a word this build may not know).
    pub word: &'a str,
    pub machine_id: Option<i64>,
    pub machine_name: &'a str,
}

impl Cancelled<'_> {
    /// Undoes what the task's acceptance did, in the caller's transaction:
    /// a create closes its machine and refunds its GPUs (or, when its
    /// container was already made, queues the delete that removes it), a
    /// restore gives its GPUs back, a snapshot or reclaim ends its
    /// snapshot. The audit detail, `by` whom.
    pub(crate) async fn undo(
        &self,
        tx: &mut SqliteConnection,
        who: &User,
        has_container: bool,
        by: &str,
    ) -> Result<String, PlatformError> {
        let mut detail = format!("task #{} ({} of machine {}) {by}", self.id, self.word, self.machine_name);
        match (self.kind, self.machine_id) {
            (Some(TaskKind::Create), Some(machine_id)) if has_container => {
                let delete_id = delete_instead(&mut *tx, who, machine_id, self.machine_name, self.id).await?;
                detail.push_str(&format!("; its container already existed, so the machine is deleted by task #{delete_id} (GPUs returned once the container is removed)"));
            }
            (Some(TaskKind::Create), Some(machine_id)) => {
                // A machine made on a kept volume gives it back: cancelling a
                // create must not cost the data it was to start from.
                if super::run::keep_machines_volume(&mut *tx, machine_id, true).await? {
                    detail.push_str("; its kept volume is kept again");
                }
                let refunded =
                    machine::release(&mut *tx, machine_id, MachineState::Deleted, &format!("create {by}")).await?;
                detail.push_str(&format!("; {refunded} GPU(s) returned to the group's quota"));
            }
            // A restore holds the GPUs it was given: back, and reclaimed again.
            (Some(TaskKind::Restore), Some(machine_id)) => {
                let refunded =
                    machine::release(&mut *tx, machine_id, MachineState::Reclaimed, &format!("restore {by}")).await?;
                detail.push_str(&format!("; {refunded} GPU(s) returned to the group's quota"));
            }
            (Some(TaskKind::Snapshot), _) => super::snapshot::task_ended(&mut *tx, self.id, by).await?,
            // The warning goes too: left with its deadline passed, the next
            // pass would queue the reclaim again within a minute. If the
            // machine stays idle it is warned again, with a full grace period.
            (Some(TaskKind::Reclaim), machine_id) => {
                super::snapshot::task_ended(&mut *tx, self.id, by).await?;
                if let Some(machine_id) = machine_id {
                    let reason = format!(
                        "its reclaim (task #{}) was {by}; if it stays idle it is warned again, with a full grace period",
                        self.id
                    );
                    if super::reclaim::withdraw(&mut *tx, machine_id, &reason).await? {
                        detail.push_str("; the machine's idle warning was withdrawn");
                    }
                }
            }
            _ => {}
        }
        Ok(detail)
    }
}

/// Reclaim and rebalance tasks are the system's: they name the machine's
/// owner as requester only so the owner sees them. Cancelling a reclaim
/// would leave the deadline passed and the machine idle past its
/// extensions, and a script could do it at every pass; only an admin may.
/// So is the delete of a compute task's machine (`on_job`): its owner may
/// not ask for one either (they cancel the task), and a cancelled one
/// would hold the task's GPUs until the watcher queues it again.
fn refuse_system_task(who: &User, task_id: i64, kind: Option<TaskKind>, on_job: bool) -> Result<(), PlatformError> {
    let instead = match kind {
        _ if who.role.is_admin() => return Ok(()),
        Some(TaskKind::Reclaim) => "an idle reclaim is the system's; extend the deadline instead (or ask an admin to exempt the machine)",
        Some(TaskKind::Rebalance) => "a hot-GPU move is the system's; opt the machine out of rebalancing on its page instead",
        Some(TaskKind::Delete) if on_job => "the delete of a compute task's machine is the system's (it gives the task's GPUs back); only an admin may cancel it",
        _ => return Ok(()),
    };
    Err(PlatformError::Conflict(format!("task #{task_id} cannot be cancelled: {instead}")))
}

/// A delete that has begun (its machine shows `deleting`: a try reached
/// the engine, or it replaces a cancelled create) cannot be undone: the
/// container may be half-removed, and a `deleting` machine can neither go
/// back to running nor take another operation, so cancelling would leave
/// it holding its GPUs for ever. It finishes by itself — when the engine
/// answers, or by closing the machine after its last retry.
async fn refuse_begun_delete(
    tx: &mut SqliteConnection,
    task_id: i64,
    machine_id: Option<i64>,
    machine_name: &str,
    attempts: i64,
) -> Result<(), PlatformError> {
    let deleting = match machine_id {
        Some(id) => machine::current(tx, id).await?.state == MachineState::Deleting,
        None => false,
    };
    if attempts > 0 || deleting {
        return Err(PlatformError::Conflict(format!(
            "task #{task_id} cannot be cancelled: the delete of machine {machine_name} has already begun on its node and is waiting to retry; \
             it finishes by itself once the node's engine answers (or after its last retry the machine is closed and its GPUs returned)"
        )));
    }
    Ok(())
}

/// Queues the delete that replaces a cancelled create whose container
/// exists: the machine shows `deleting` and keeps its GPUs until the
/// dispatcher has removed the container (and the volume nobody used yet).
async fn delete_instead(
    tx: &mut SqliteConnection,
    who: &User,
    machine_id: i64,
    machine_name: &str,
    create_id: i64,
) -> Result<i64, PlatformError> {
    let group_id: i64 =
        sqlx::query_scalar("SELECT group_id FROM machines WHERE id = ?").bind(machine_id).fetch_one(&mut *tx).await?;
    machine::move_to(
        tx,
        machine_id,
        MachineState::Deleting,
        None,
        &format!("create cancelled by {}; removing its container", who.username),
    )
    .await?;
    // A compute task waiting for this machine ends cancelled, not failed,
    // when the delete gives the GPUs back.
    sqlx::query("UPDATE compute_tasks SET cancel_requested = 1 WHERE machine_id = ?")
        .bind(machine_id)
        .execute(&mut *tx)
        .await?;
    let message = format!("replaces the cancelled create #{create_id}");
    // The volume goes with the container, unless the machine was made on a
    // kept volume: that one is kept again when the delete ends.
    let was_kept: bool = sqlx::query_scalar(&format!(
        "SELECT volume_name <> {} FROM machines WHERE id = ?",
        crate::machines::VOLUME_NAME_SQL
    ))
    .bind(machine_id)
    .fetch_one(&mut *tx)
    .await?;
    let new = NewTask {
        kind: TaskKind::Delete,
        machine_id: Some(machine_id),
        machine_name,
        requester_id: who.id,
        group_id,
        keep_volume: was_kept,
        message: &message,
    };
    let delete_id = insert_pending(tx, &new).await?;
    set_state(tx, delete_id, TaskState::Pending, TaskState::Scheduled, &message).await?;
    Ok(delete_id)
}

/// Cancels the machine's tasks of `kind` that no runner has claimed yet
/// (pending or scheduled, never attempted: nothing was done on the node),
/// each recorded with `why` and audited, in the caller's transaction;
/// their ids. What a queued reclaim or move becomes when it is no longer
/// wanted.
pub(crate) async fn cancel_unclaimed(
    conn: &mut SqliteConnection,
    machine_id: i64,
    kind: TaskKind,
    why: &str,
) -> Result<Vec<i64>, PlatformError> {
    let queued: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, state FROM tasks WHERE machine_id = ? AND kind = ? AND state IN ('pending', 'scheduled') AND attempts = 0")
            .bind(machine_id)
            .bind(kind.as_str())
            .fetch_all(&mut *conn)
            .await?;
    let mut ids = Vec::with_capacity(queued.len());
    for (id, state) in queued {
        let from: TaskState =
            state.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string()))?;
        set_state(conn, id, from, TaskState::Cancelled, why).await?;
        audit::record(&mut *conn, None, "task.cancel", &format!("task #{id} ({kind} of machine #{machine_id}) {why}"))
            .await?;
        ids.push(id);
    }
    Ok(ids)
}
