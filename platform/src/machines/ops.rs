//! Operations on existing machines (restart, reinstall, delete): accepted
//! only in a state that allows them, one at a time, and restart/reinstall
//! only while the machine holds every GPU it needs.

use super::{
    make_way::{self, Way},
    visibility,
};
use crate::{
    accounts::User,
    audit,
    db::Pool,
    transitions::{self, task::NewTask},
    PlatformError,
};
use gantry_core::task::{accepts, MachineState, TaskKind, TaskState, Workload};

#[derive(Debug, Clone)]
pub struct OperationRequest {
    pub machine_id: i64,
    pub kind: TaskKind,
    /// Delete only: keep the data volume.
    pub keep_volume: bool,
}

/// Queues an operation on a machine the requester may touch: their own, or
/// any as an admin (group members see each other's machines, but a delete
/// takes the owner's data volume with it). A compute task's machine ends
/// with its task (cancel the task), except by an admin's delete; nobody
/// restarts or reinstalls it. Refused when the machine's state does not
/// accept it or another operation is open — except a delete, accepted in
/// every state but `deleted` (see [`make_way`]): the same delete asked for
/// twice returns the first one's task; one that closed a machine never
/// made returns its cancelled create.
pub async fn request_operation(pool: &Pool, requester: &User, op: OperationRequest) -> Result<i64, PlatformError> {
    // Snapshots, reclaims, restores and rebalances have their own entry
    // points (crate::snapshots, crate::reclaim), which check more.
    if !matches!(op.kind, TaskKind::Restart | TaskKind::Reinstall | TaskKind::Delete) {
        return Err(PlatformError::BadRequest(format!("{} is not an operation on an existing machine", op.kind)));
    }
    let mut tx = transitions::begin(pool).await?;
    let (cond, bind) = visibility(requester, "group_id");
    let row: Option<(i64, String, String)> =
        sqlx::query_as(&format!("SELECT owner_id, workload, name FROM machines WHERE id = ? AND ({cond})"))
            .bind(op.machine_id)
            .bind(bind)
            .fetch_optional(&mut *tx)
            .await?;
    // Another group's machine is "not found": its existence is not ours to know.
    let (owner, workload, name) = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    let job = workload.parse::<Workload>()? == Workload::Job;
    if !requester.acts_for(owner) {
        return Err(PlatformError::Conflict(format!("only machine {name}'s owner, or an admin, can {} it", op.kind)));
    }
    if job && !requester.role.is_admin() {
        return Err(PlatformError::Conflict(format!(
            "machine {name} runs a compute task: cancel the task instead (its machine goes with it)"
        )));
    }
    // A job's command runs at most once: a restart would run it again in
    // its container, and a reinstall's new container would too (the
    // dispatcher then only reports the job already started: a "success"
    // that did nothing). An admin included.
    if job && matches!(op.kind, TaskKind::Restart | TaskKind::Reinstall) {
        return Err(PlatformError::Conflict(format!(
            "machine {name} runs a compute task, whose command runs at most once: it is not restarted or reinstalled; \
             cancel the task (or delete the machine) and submit the task again"
        )));
    }
    let cur = transitions::machine::current(&mut tx, op.machine_id).await?;
    accepts(&cur.name, cur.state, op.kind).map_err(PlatformError::Conflict)?;
    if matches!(op.kind, TaskKind::Restart | TaskKind::Reinstall) {
        gantry_core::machine::may_start(&cur.name, cur.held as u32, cur.gpu_count as u32)
            .map_err(PlatformError::Conflict)?;
        refuse_if_gpus_gone(&mut tx, op.machine_id, &cur.name).await?;
    }
    if op.kind == TaskKind::Delete && op.keep_volume && cur.state == MachineState::Lost {
        return Err(PlatformError::Conflict(format!(
            "machine {}'s node was lost; its volume cannot be kept",
            cur.name
        )));
    }
    if op.kind == TaskKind::Delete {
        match make_way::for_delete(&mut tx, requester, op.machine_id, &cur.name).await? {
            Way::Queued(task_id) => return Ok(task_id),
            Way::Closed(create_id) => {
                let detail = format!(
                    "delete machine {} before it was made (its create, task #{create_id}, cancelled)",
                    cur.name
                );
                audit::record(&mut *tx, Some(requester.id), "machine.delete", &detail).await?;
                tx.commit().await?;
                return Ok(create_id);
            }
            Way::Clear => {}
        }
    } else {
        make_way::refuse_if_busy(&mut tx, op.machine_id, &cur.name, op.kind).await?;
    }
    let task_id = transitions::task::insert_pending(
        &mut tx,
        &NewTask {
            kind: op.kind,
            machine_id: Some(op.machine_id),
            machine_name: &cur.name,
            requester_id: requester.id,
            group_id: cur.group_id,
            keep_volume: op.keep_volume,
            message: "accepted",
        },
    )
    .await?;
    // The machine's node is known, so the task is ready for a dispatcher.
    transitions::task::set_state(&mut tx, task_id, TaskState::Pending, TaskState::Scheduled, "queued").await?;
    let detail = if op.kind == TaskKind::Delete && op.keep_volume {
        format!("{} machine {} (keeping its volume)", op.kind, cur.name)
    } else {
        format!("{} machine {}", op.kind, cur.name)
    };
    audit::record(&mut *tx, Some(requester.id), &format!("machine.{}", op.kind), &detail).await?;
    tx.commit().await?;
    Ok(task_id)
}

/// A machine holding a GPU its node no longer reports cannot start on it:
/// the container's start would fail with the GPU runtime's own error.
/// Said plainly instead, with the way out.
pub(crate) async fn refuse_if_gpus_gone(
    tx: &mut sqlx::SqliteConnection,
    machine_id: i64,
    name: &str,
) -> Result<(), PlatformError> {
    let gone: Vec<i64> = sqlx::query_scalar(
        "SELECT g.idx FROM machine_gpus mg JOIN gpus g ON g.id = mg.gpu_id
         WHERE mg.machine_id = ? AND g.id IN (SELECT gpu_id FROM gpus_gone) ORDER BY g.idx",
    )
    .bind(machine_id)
    .fetch_all(&mut *tx)
    .await?;
    if gone.is_empty() {
        return Ok(());
    }
    let list = gone.iter().map(|i| format!("#{i}")).collect::<Vec<_>>().join(", ");
    Err(PlatformError::Conflict(format!(
        "machine {name} cannot start: its GPU(s) {list} are no longer reported by its node (a card that dropped off the bus?); \
         delete it (keeping its data volume) and create it again, or start it once the node reports them again"
    )))
}
