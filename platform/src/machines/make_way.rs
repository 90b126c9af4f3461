//! A delete is accepted in every state but `deleted`: whatever is in flight
//! on the machine makes way for it. A user who notices a mistake right
//! after Create, or a script that creates and deletes at once, must not be
//! told to wait and come back — and must not leave GPUs held meanwhile.
//!
//! What has not started on a node (never claimed) is cancelled in the
//! delete's own commit: a create that made nothing closes the machine
//! there and then. What has started runs on until its next step boundary,
//! where it stops for the delete queued behind it
//! (`dispatch::give_way`); a task waiting out a retry backoff is made due
//! now, so it meets the delete at once instead of minutes later.

use crate::{
    accounts::User,
    audit, now,
    transitions::task::{set_state, Cancelled},
    PlatformError,
};
use gantry_core::task::{may_queue_behind, TaskKind, TaskState};
use sqlx::SqliteConnection;

/// What the way to a machine's delete looks like.
pub(super) enum Way {
    /// A delete is already queued: the same request twice is that one.
    Queued(i64),
    /// The machine was never made: cancelling its create (this task)
    /// closed it and refunded its GPUs; no delete task is needed.
    Closed(i64),
    /// Queue the delete, behind whatever still runs.
    Clear,
}

/// An operation not yet finished on the machine.
struct Open {
    id: i64,
    kind: TaskKind,
    state: TaskState,
    attempts: i64,
}

async fn open_tasks(tx: &mut SqliteConnection, machine_id: i64) -> Result<Vec<Open>, PlatformError> {
    let rows: Vec<(i64, String, String, i64)> = sqlx::query_as(
        "SELECT id, kind, state, attempts FROM tasks
         WHERE machine_id = ? AND state IN ('pending', 'scheduled', 'running') ORDER BY id",
    )
    .bind(machine_id)
    .fetch_all(&mut *tx)
    .await?;
    rows.into_iter()
        .map(|(id, kind, state, attempts)| Ok(Open { id, kind: kind.parse()?, state: state.parse()?, attempts }))
        .collect()
}

/// Clears the way for `who`'s delete of machine `name`, in the caller's
/// transaction (see the module's comment).
pub(super) async fn for_delete(
    tx: &mut SqliteConnection,
    who: &User,
    machine_id: i64,
    name: &str,
) -> Result<Way, PlatformError> {
    let open = open_tasks(tx, machine_id).await?;
    if let Some(delete) = open.iter().find(|t| t.kind == TaskKind::Delete) {
        return Ok(Way::Queued(delete.id));
    }
    let by = format!("cancelled: {} asked for machine {name}'s delete", who.username);
    let mut closed_by = None;
    for task in open {
        if task.state != TaskState::Running && task.attempts == 0 {
            set_state(tx, task.id, task.state, TaskState::Cancelled, &by).await?;
            let cancelled = Cancelled {
                id: task.id,
                kind: Some(task.kind),
                word: task.kind.as_str(),
                machine_id: Some(machine_id),
                machine_name: name,
            };
            // Never claimed, so nothing was made on the node: no container.
            let detail = cancelled.undo(tx, who, false, &by).await?;
            audit::record(&mut *tx, Some(who.id), "task.cancel", &detail).await?;
            if task.kind == TaskKind::Create {
                closed_by = Some(task.id);
            }
        } else if task.state == TaskState::Scheduled {
            sqlx::query("UPDATE tasks SET not_before = ? WHERE id = ?")
                .bind(now())
                .bind(task.id)
                .execute(&mut *tx)
                .await?;
        }
    }
    Ok(closed_by.map_or(Way::Clear, Way::Closed))
}

/// Refuses `kind` while an operation it may not queue behind is open on
/// the machine (a restart or reinstall may wait for a snapshot).
pub(super) async fn refuse_if_busy(
    tx: &mut SqliteConnection,
    machine_id: i64,
    name: &str,
    kind: TaskKind,
) -> Result<(), PlatformError> {
    let open = open_tasks(tx, machine_id).await?;
    if open.iter().all(|t| may_queue_behind(kind, t.kind)) {
        return Ok(());
    }
    Err(PlatformError::Conflict(format!("machine {name} is busy with another operation; wait for it to finish")))
}
