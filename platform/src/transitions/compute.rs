//! Compute task rows. A compute task runs on a machine of workload `job`,
//! so its state follows that machine's: scheduled when the machine is
//! admitted, running once its container started, and finished in the same
//! commit that releases the machine's GPUs (whatever released them: the
//! job's end, a cancel, a failed start, its node being lost).

use super::task;
use crate::{accounts::User, audit, machines::visibility, now, PlatformError};
use gantry_core::{
    compute,
    task::{accepts, backoff_secs, TaskKind, TaskState},
};
use sqlx::SqliteConnection;

pub struct NewCompute<'a> {
    pub name: &'a str,
    pub requester: &'a User,
    pub framework: &'a str,
    pub framework_version: &'a str,
    pub interpreter: &'a str,
    pub interpreter_version: &'a str,
    pub command: &'a [String],
    pub gpu_count: u32,
    pub gpu_model: Option<&'a str>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
    pub time_limit_secs: i64,
    /// Resolved read-only dataset mounts, handed to the machine on placement.
    pub datasets: &'a [crate::datasets::mounts::DatasetMount],
}

pub async fn insert(conn: &mut SqliteConnection, t: &NewCompute<'_>) -> Result<i64, PlatformError> {
    let now = now();
    Ok(sqlx::query_scalar(
        "INSERT INTO compute_tasks (name, requester_id, group_id, framework, framework_version, interpreter, interpreter_version, command,
                                    gpu_count, gpu_model, cpu_millis, memory_mb, time_limit_secs, datasets, state, message, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 'waiting for a decision', ?, ?) RETURNING id",
    )
    .bind(t.name)
    .bind(t.requester.id)
    .bind(t.requester.group_id)
    .bind(t.framework)
    .bind(t.framework_version)
    .bind(t.interpreter)
    .bind(t.interpreter_version)
    .bind(serde_json::to_string(t.command).unwrap_or_default())
    .bind(t.gpu_count)
    .bind(t.gpu_model)
    .bind(t.cpu_millis)
    .bind(t.memory_mb)
    .bind(t.time_limit_secs)
    .bind(serde_json::to_string(t.datasets).unwrap_or_else(|_| "[]".into()))
    .bind(now)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?)
}

/// A compute task's state; `None` when there is no such task.
pub(crate) async fn find_state(conn: &mut SqliteConnection, id: i64) -> Result<Option<TaskState>, PlatformError> {
    let state: Option<String> =
        sqlx::query_scalar("SELECT state FROM compute_tasks WHERE id = ?").bind(id).fetch_optional(&mut *conn).await?;
    state
        .map(|s| s.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string())))
        .transpose()
}

async fn state_of(conn: &mut SqliteConnection, id: i64) -> Result<TaskState, PlatformError> {
    find_state(conn, id).await?.ok_or_else(|| PlatformError::NotFound("compute task".into()))
}

/// Compare-and-set along the compute lifecycle's edges.
async fn move_to(
    conn: &mut SqliteConnection,
    id: i64,
    to: TaskState,
    message: &str,
) -> Result<TaskState, PlatformError> {
    let from = state_of(conn, id).await?;
    if !compute::can_transition(from, to) {
        return Err(PlatformError::Conflict(format!("compute task #{id} is {from}; it cannot become {to}")));
    }
    let finished = to.is_terminal().then(now);
    let started = (to == TaskState::Running).then(now);
    sqlx::query(
        "UPDATE compute_tasks SET state = ?, message = ?, updated_at = ?, finished_at = COALESCE(?, finished_at), started_at = COALESCE(?, started_at)
         WHERE id = ? AND state = ?",
    )
    .bind(to.as_str())
    .bind(message)
    .bind(now())
    .bind(finished)
    .bind(started)
    .bind(id)
    .bind(from.as_str())
    .execute(&mut *conn)
    .await?;
    if to.is_terminal() {
        finished_notice(conn, id, to, message).await?;
    }
    Ok(from)
}

/// Tells the requester that their task ended, in the commit that ends it
/// (every way a compute task ends comes through [`move_to`]).
async fn finished_notice(
    conn: &mut SqliteConnection,
    id: i64,
    to: TaskState,
    message: &str,
) -> Result<(), PlatformError> {
    let (requester, name): (i64, String) = sqlx::query_as("SELECT requester_id, name FROM compute_tasks WHERE id = ?")
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
    let subject = format!("Compute task #{id} ({name}) {to}");
    // A time limit ends it failed, saying so in `message`.
    let body = format!("Compute task #{id} ({name}) ended: {to}. {message}");
    crate::notifications::notify(conn, requester, crate::notifications::Kind::ComputeFinished, &subject, &body).await?;
    Ok(())
}

/// The matcher's latest decision for a task that keeps waiting (or is
/// rejected for good).
pub async fn decided(
    conn: &mut SqliteConnection,
    id: i64,
    decision_json: &str,
    region: Option<(i64, i64)>,
    outcome: Result<&str, &str>,
) -> Result<(), PlatformError> {
    // Only while it waits: a second matcher read the queue before another
    // placed (or its requester cancelled) the task; its stale decision —
    // a region, or a rejection that would fail a running task — is void.
    if state_of(conn, id).await? != TaskState::Pending {
        return Ok(());
    }
    sqlx::query(
        "UPDATE compute_tasks SET decision = ?, region_id = ?, region_image_id = ?, updated_at = ? WHERE id = ?",
    )
    .bind(decision_json)
    .bind(region.map(|r| r.0))
    .bind(region.map(|r| r.1))
    .bind(now())
    .bind(id)
    .execute(&mut *conn)
    .await?;
    match outcome {
        Ok(waiting) => {
            sqlx::query("UPDATE compute_tasks SET message = ? WHERE id = ? AND state = 'pending'")
                .bind(waiting)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        Err(rejected) => {
            move_to(conn, id, TaskState::Failed, rejected).await?;
        }
    }
    Ok(())
}

/// A pending task its group's rules can never admit ends `failed` with
/// why, rather than hold up its group's queue; `false` when it is no longer
/// pending (cancelled meanwhile).
pub async fn never_admitted(conn: &mut SqliteConnection, id: i64, why: &str) -> Result<bool, PlatformError> {
    if state_of(conn, id).await? != TaskState::Pending {
        return Ok(false);
    }
    move_to(conn, id, TaskState::Failed, why).await?;
    audit::record(&mut *conn, None, "compute.finished", &format!("compute task #{id}: failed ({why})")).await?;
    Ok(true)
}

/// Admission wrote the task's machine (same transaction), with the region,
/// image and decision of this placement: two matcher passes may decide the
/// same head, and the row must tell what was placed, not the last
/// decision recorded.
pub async fn scheduled(
    conn: &mut SqliteConnection,
    job: &crate::machines::Job,
    machine_id: i64,
    placed: &str,
) -> Result<(), PlatformError> {
    move_to(conn, job.compute_task_id, TaskState::Scheduled, placed).await?;
    sqlx::query(
        "UPDATE compute_tasks SET machine_id = ?, region_id = ?, region_image_id = ?, decision = ? WHERE id = ?",
    )
    .bind(machine_id)
    .bind(job.region_id)
    .bind(job.region_image_id)
    .bind(&job.decision)
    .bind(job.compute_task_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The machine's create task succeeded: if it is a job, it now runs.
pub async fn machine_started(conn: &mut SqliteConnection, machine_id: i64) -> Result<(), PlatformError> {
    let id: Option<i64> =
        sqlx::query_scalar("SELECT id FROM compute_tasks WHERE machine_id = ? AND state = 'scheduled'")
            .bind(machine_id)
            .fetch_optional(&mut *conn)
            .await?;
    if let Some(id) = id {
        move_to(conn, id, TaskState::Running, "running").await?;
    }
    Ok(())
}

/// The job's container ended (or was stopped): its exit code and the end
/// of its output, kept after the container is gone. The first end recorded
/// stands: another server's watcher that read the row before it and then
/// found the container gone (its delete had begun) must not turn a job's
/// own exit into "vanished" with no output.
pub async fn exited(
    conn: &mut SqliteConnection,
    id: i64,
    exit_code: i64,
    logs_tail: &str,
    message: &str,
) -> Result<(), PlatformError> {
    sqlx::query("UPDATE compute_tasks SET exit_code = ?, logs_tail = ?, message = ?, updated_at = ? WHERE id = ? AND state = 'running' AND exit_code IS NULL")
        .bind(exit_code)
        .bind(logs_tail)
        .bind(message)
        .bind(now())
        .bind(id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// A job's message once the watcher has decided to stop it for its time
/// limit (`stopping`), and once it has.
pub fn time_limit_message(limit_secs: i64, stopping: bool) -> String {
    format!("time limit of {limit_secs} s reached; {}", if stopping { "stopping" } else { "stopped" })
}

/// The watcher is about to stop a running job for its time limit: recorded
/// (in the message the person sees, exactly as [`time_limit_message`] writes
/// it — nothing else writes that) before the stop, so that a pass cut off
/// after the stop leaves the reason to the next one. A cancel recorded
/// meanwhile is left as it is: a cancel wins, as in the outcome.
pub async fn stopping_for_time_limit(
    conn: &mut SqliteConnection,
    id: i64,
    limit_secs: i64,
) -> Result<(), PlatformError> {
    sqlx::query("UPDATE compute_tasks SET message = ?, updated_at = ? WHERE id = ? AND state = 'running' AND exit_code IS NULL AND cancel_requested = 0")
        .bind(time_limit_message(limit_secs, true))
        .bind(now())
        .bind(id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The disk watcher is about to stop job machine `machine_id`'s container
/// for writing past its group's limit outside /data: the reason, as
/// `gantry_core::disk::stopped_text` writes it, recorded before the stop
/// as the time limit's is, so that the compute watcher ends the task
/// failed with it. A cancel recorded meanwhile is left as it is.
pub async fn stopping_for_disk(conn: &mut SqliteConnection, machine_id: i64, why: &str) -> Result<(), PlatformError> {
    sqlx::query("UPDATE compute_tasks SET message = ?, updated_at = ? WHERE machine_id = ? AND state = 'running' AND exit_code IS NULL AND cancel_requested = 0")
        .bind(why)
        .bind(now())
        .bind(machine_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The job ended: its machine's delete is queued by the system, in the
/// commit that records the exit, whoever the requester is now (moved to
/// another group, disabled) — the person only names who the task is for.
/// `None` when the machine cannot take it now (another operation is
/// queued, or its state refuses a delete); the watcher tries again on a
/// later pass, because the exit code stays recorded — and again after a
/// delete that failed or an admin cancelled (see [`queue_delete`]).
pub async fn delete_job_machine(conn: &mut SqliteConnection, id: i64, why: &str) -> Result<Option<i64>, PlatformError> {
    let machine_id: i64 =
        sqlx::query_scalar("SELECT machine_id FROM compute_tasks WHERE id = ? AND machine_id IS NOT NULL")
            .bind(id)
            .fetch_one(&mut *conn)
            .await?;
    if super::reclaim::busy(conn, machine_id).await? {
        return Ok(None);
    }
    queue_delete(conn, id, why).await
}

/// Queues the delete; the caller checked that no other operation is open.
/// Each earlier delete of the machine that failed or was cancelled delays
/// this one by the dispatcher's backoff, so a delete the engine keeps
/// refusing is not tried again at every pass of the watcher.
async fn queue_delete(conn: &mut SqliteConnection, id: i64, why: &str) -> Result<Option<i64>, PlatformError> {
    let (machine_id, requester_id): (i64, i64) =
        sqlx::query_as("SELECT machine_id, requester_id FROM compute_tasks WHERE id = ? AND machine_id IS NOT NULL")
            .bind(id)
            .fetch_one(&mut *conn)
            .await?;
    let cur = super::machine::current(conn, machine_id).await?;
    if accepts(&cur.name, cur.state, TaskKind::Delete).is_err() {
        return Ok(None);
    }
    let earlier: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM tasks WHERE machine_id = ? AND kind = 'delete' AND state IN ('failed', 'cancelled')",
    )
    .bind(machine_id)
    .fetch_one(&mut *conn)
    .await?;
    let delay = if earlier > 0 { backoff_secs(earlier as u32) } else { 0 };
    let mut message = format!("compute task #{id} ended ({why}); removing its machine");
    if delay > 0 {
        message.push_str(&format!(" (try {} in {delay} s)", earlier + 1));
    }
    let new = task::NewTask {
        kind: TaskKind::Delete,
        machine_id: Some(machine_id),
        machine_name: &cur.name,
        requester_id,
        group_id: cur.group_id,
        keep_volume: false,
        message: &message,
    };
    let task_id = task::insert_pending(conn, &new).await?;
    task::set_state(conn, task_id, TaskState::Pending, TaskState::Scheduled, &message).await?;
    sqlx::query("UPDATE tasks SET not_before = ? WHERE id = ?")
        .bind(now() + delay)
        .bind(task_id)
        .execute(&mut *conn)
        .await?;
    audit::record(&mut *conn, None, "machine.delete", &format!("machine {}: {message}", cur.name)).await?;
    Ok(Some(task_id))
}

/// Called by `machine::release` for every machine it releases: a job's
/// task ends here, in the commit that gives its GPUs back.
pub async fn machine_released(conn: &mut SqliteConnection, machine_id: i64, why: &str) -> Result<(), PlatformError> {
    let row: Option<(i64, String, bool, Option<i64>, String)> = sqlx::query_as(
        "SELECT id, state, cancel_requested, exit_code, message FROM compute_tasks WHERE machine_id = ?",
    )
    .bind(machine_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((id, state, cancel_requested, exit_code, message)) = row else {
        return Ok(());
    };
    let state: TaskState =
        state.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string()))?;
    if state.is_terminal() {
        return Ok(());
    }
    // Never started: a cancelled or failed create, or its node was lost.
    // A cancel is told by the rows (the task's request, or its machine's
    // create cancelled in this commit), never by the words of `why`: an
    // engine's error may say "cancelled" too.
    let create_cancelled: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE machine_id = ? AND kind = 'create' AND state = 'cancelled')",
    )
    .bind(machine_id)
    .fetch_one(&mut *conn)
    .await?;
    // A node marked lost ends its unstarted creates `cancelled` too; the
    // job did not start because of the node, so it failed (its node's
    // state is written first in that commit).
    let node_lost: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM machines m JOIN nodes n ON n.id = m.node_id WHERE m.id = ? AND n.state = 'lost')",
    )
    .bind(machine_id)
    .fetch_one(&mut *conn)
    .await?;
    let (to, text) = if state == TaskState::Running && (exit_code.is_some() || cancel_requested) {
        (compute::outcome(cancel_requested, exit_code), message)
    } else if cancel_requested || (create_cancelled && !node_lost) {
        (TaskState::Cancelled, why.to_string())
    } else {
        (TaskState::Failed, why.to_string())
    };
    move_to(conn, id, to, &text).await?;
    audit::record(&mut *conn, None, "compute.finished", &format!("compute task #{id}: {to} ({text})")).await?;
    // A failed create leaves the machine `failed`: it would keep its node's
    // CPU and memory and its volume for ever, since nobody may delete a job
    // machine but the system. Its delete goes in this commit; the create
    // being failed is the only open task (it ends in this commit too).
    let failed: bool = sqlx::query_scalar("SELECT state = 'failed' AND workload = 'job' FROM machines WHERE id = ?")
        .bind(machine_id)
        .fetch_one(&mut *conn)
        .await?;
    let other_open: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM tasks WHERE machine_id = ? AND kind <> 'create' AND state IN ('pending', 'scheduled', 'running'))")
            .bind(machine_id)
            .fetch_one(&mut *conn)
            .await?;
    if failed && !other_open {
        queue_delete(conn, id, &text).await?;
    }
    Ok(())
}

/// Cancels the pending (not yet placed) tasks of a disabled account — of
/// `requester`, or of every disabled account when `None` — so they never
/// start and use their group's quota; returns how many.
pub async fn cancel_pending_of_disabled(
    conn: &mut SqliteConnection,
    requester: Option<i64>,
) -> Result<u64, PlatformError> {
    let ids: Vec<(i64, String)> = sqlx::query_as(
        "SELECT c.id, u.username FROM compute_tasks c JOIN users u ON u.id = c.requester_id
         WHERE c.state = 'pending' AND u.disabled = 1 AND (?1 IS NULL OR u.id = ?1)",
    )
    .bind(requester)
    .fetch_all(&mut *conn)
    .await?;
    for (id, username) in &ids {
        let why = format!("cancelled: account {username} is disabled");
        move_to(conn, *id, TaskState::Cancelled, &why).await?;
        audit::record(&mut *conn, None, "compute.finished", &format!("compute task #{id}: cancelled ({why})")).await?;
    }
    Ok(ids.len() as u64)
}

/// A user (the requester) or an admin cancels a compute task: a pending
/// one at once; a scheduled or running one by asking the watcher to stop
/// its machine, which ends the task when the GPUs are given back.
pub async fn cancel(conn: &mut SqliteConnection, who: &User, id: i64) -> Result<TaskState, PlatformError> {
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(i64, String, Option<i64>)> =
        sqlx::query_as(&format!("SELECT requester_id, state, exit_code FROM compute_tasks WHERE id = ? AND ({cond})"))
            .bind(id)
            .bind(bind)
            .fetch_optional(&mut *conn)
            .await?;
    let (requester, state, exit_code) = row.ok_or_else(|| PlatformError::NotFound("compute task".into()))?;
    if requester != who.id && !who.role.is_admin() {
        return Err(PlatformError::Conflict(
            "only the person who submitted a compute task, or an admin, can cancel it".into(),
        ));
    }
    let state: TaskState =
        state.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string()))?;
    // Its command already ended (the watcher recorded how) and its machine
    // is being removed: a cancel now would turn a success into "cancelled".
    if let (TaskState::Running, Some(code)) = (state, exit_code) {
        return Err(PlatformError::Conflict(format!(
            "compute task #{id} has already exited with code {code}; its machine is being removed, and the task ends when its GPUs are back"
        )));
    }
    let by = format!("cancelled by {}", who.username);
    match state {
        TaskState::Pending => {
            move_to(conn, id, TaskState::Cancelled, &by).await?;
        }
        TaskState::Scheduled | TaskState::Running => {
            sqlx::query("UPDATE compute_tasks SET cancel_requested = 1, message = ?, updated_at = ? WHERE id = ?")
                .bind(format!("{by}; stopping"))
                .bind(now())
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        done => return Err(PlatformError::Conflict(format!("compute task #{id} has already finished ({done})"))),
    }
    audit::record(&mut *conn, Some(who.id), "compute.cancel", &format!("compute task #{id} {by}")).await?;
    Ok(state)
}

/// Whether the compute task that `machine_id` runs for was asked to be
/// cancelled: its create checks before starting the command, so a task
/// cancelled while its machine was being made never runs it.
pub async fn cancel_requested(db: impl sqlx::SqliteExecutor<'_>, machine_id: i64) -> Result<bool, PlatformError> {
    Ok(sqlx::query_scalar::<_, bool>("SELECT cancel_requested FROM compute_tasks WHERE machine_id = ?")
        .bind(machine_id)
        .fetch_optional(db)
        .await?
        .unwrap_or(false))
}
