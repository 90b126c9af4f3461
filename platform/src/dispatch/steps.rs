//! The steps of each operation. Every step is idempotent, so a task that
//! is retried, or resumed by another process after its lease expired,
//! simply runs from the start again. Every write goes through the
//! transition module under the task's lease.

use super::{context, ClaimedTask, Dispatcher};
use crate::{
    executor::{
        docker::{is_volume_failure, missing_program},
        ContainerStatus, ExecError, Executor,
    },
    transitions::run,
    PlatformError,
};
use gantry_core::task::{MachineState, TaskKind};
use tracing::Instrument;

pub enum StepError {
    /// The engine could not be reached: try again later.
    Retry(String),
    /// The database was busy (locked, or no connection free in time): try
    /// again later; unlike an unreachable engine, giving up after the last
    /// try says nothing about the engine.
    Busy(String),
    Fail(String),
    /// The lease went to another process (or an admin ended the task):
    /// stop without writing anything.
    LeaseLost(String),
    /// The test hook stopped the task here, as a crash would.
    Abandoned(&'static str),
}

/// How a task ended when the steps ran through.
pub enum Done {
    /// Record success with this message.
    Succeeded(String),
    /// The steps already recorded the outcome (delete).
    Recorded,
}

/// The task's and machine's messages are read by the machine's owner. The
/// engine's own text names its endpoint (an address inside the cluster, a
/// socket path), host paths and devices: it goes to the log, under the
/// task's span (see [`run`]), and the messages get a plain reason — as the
/// terminal does (server `workspace::exec_error`).
impl From<ExecError> for StepError {
    fn from(e: ExecError) -> Self {
        let reason = engine_reason(&e);
        tracing::warn!(error = %e, "the engine failed a step; the task records: {reason}");
        if e.is_retryable() {
            StepError::Retry(reason)
        } else {
            StepError::Fail(reason)
        }
    }
}

/// What the machine's owner is told of an engine error.
fn engine_reason(e: &ExecError) -> String {
    let refused = "the node's engine refused the step (the error has been logged)";
    match e {
        ExecError::Unavailable(_) => "the node's engine did not answer".into(),
        ExecError::ImageMissing(_) => {
            "the machine's image is not on its node; an admin must build or load it there (Gantry never pulls)".into()
        }
        ExecError::Failed(detail) if is_volume_failure(detail) => {
            "the data volume could not be mounted on the node (the error has been logged)".into()
        }
        ExecError::Failed(detail) => match missing_program(detail) {
            Some(program) => format!("the container's command {program:?} is not in its image"),
            None => refused.into(),
        },
        ExecError::NotFound(_) => refused.into(),
    }
}

/// The node's executor. A node whose engine address cannot be used names
/// that address in the error: logged, and the task says so plainly.
async fn node_executor(d: &Dispatcher, node_id: i64) -> Result<Executor, StepError> {
    d.fleet.executor(&d.pool, node_id).await.map_err(|e| match e {
        PlatformError::BadRequest(detail) => {
            tracing::error!(node = node_id, error = %detail, "the node's engine address cannot be used");
            StepError::Fail(
                "the node's engine address cannot be used; an admin must correct the node (the error has been logged)"
                    .into(),
            )
        }
        other => other.into(),
    })
}

impl From<PlatformError> for StepError {
    fn from(e: PlatformError) -> Self {
        match e {
            PlatformError::LeaseLost(m) => StepError::LeaseLost(m),
            // A busy or stalled database passes: the steps are idempotent,
            // so the task is retried. Failing it instead could leave half
            // a reclaim — container removed, snapshot marked failed. Any
            // other database error (a constraint, a missing row) is no
            // better on the next try.
            PlatformError::Database(e) if transient(&e) => StepError::Busy(format!("the database was busy: {e}")),
            other => StepError::Fail(other.to_string()),
        }
    }
}

/// SQLite busy, locked or an IO error on the database file (any extended
/// code of those), no pooled connection in time, or an IO error reaching it.
fn transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => {
            db.code().and_then(|c| c.parse::<i32>().ok()).is_some_and(|c| matches!(c & 0xff, 5 | 6 | 10))
        }
        _ => false,
    }
}

/// Runs the task's steps; what is logged meanwhile (an engine's own error
/// text among it) names the task.
pub async fn run(d: &Dispatcher, task: &ClaimedTask) -> Result<Done, StepError> {
    steps(d, task)
        .instrument(tracing::info_span!("task", id = task.id, kind = %task.kind, machine = task.machine_id))
        .await
}

async fn steps(d: &Dispatcher, task: &ClaimedTask) -> Result<Done, StepError> {
    let lease = &task.lease;
    if run::outcome_observed(&d.pool, lease).await? {
        return super::resumed::record_observed(d, task).await;
    }
    let before = run::begin(&d.pool, lease, task.kind, task.machine_id).await?;
    d.checkpoint(task, "begun")?;
    // Decided before loading the context, which needs a node: a removed
    // node leaves its lost machines with none. A resumed delete finds the
    // machine `deleting`, so the node is asked, not only the state.
    if task.kind == TaskKind::Delete
        && (before.state == MachineState::Lost || context::node_gone(&d.pool, task.machine_id).await?)
    {
        // Its node is gone; the collector removes whatever the engine still
        // has if it ever answers again. Deleting closes the record.
        run::deleted(&d.pool, lease, task.machine_id, false, "deleted (its node was lost)").await?;
        return Ok(Done::Recorded);
    }
    let ctx = context::load(&d.pool, task.machine_id, task.id).await?;
    let exec = node_executor(d, ctx.node_id).await?;
    let step = |pct: i64, msg: &'static str| d.boundary(task, pct, msg);

    match task.kind {
        TaskKind::Create | TaskKind::Reinstall | TaskKind::Restore => {
            if ctx.is_job {
                refuse_if_job_cancelled(d, task.machine_id).await?;
                // A job's container that already started (a create retried
                // or resumed after the start) is the job: running its
                // command again would repeat whatever it did.
                if let Some(started) = started_job_container(&exec, ctx.container_id.as_deref()).await? {
                    let state = observe(d, task, &exec, &started).await?;
                    return Ok(Done::Succeeded(format!(
                        "created; its command had already started on {} ({state})",
                        ctx.node_name
                    )));
                }
            }
            step(10, "preparing the data volume").await?;
            let volume = exec.ensure_volume(&ctx.spec).await?;
            run::volume_ready(&d.pool, lease, task.machine_id, volume.size_enforced).await?;
            step(30, "removing any previous container").await?;
            remove_machine_containers(&exec, &ctx.spec.instance, task.machine_id, ctx.container_id.as_deref()).await?;
            step(50, "creating the container").await?;
            let container = exec.create_container(&ctx.spec).await?;
            run::container_created(&d.pool, lease, task.machine_id, &container.id).await?;
            // The last boundary before a job's command starts: a cancel
            // that arrived meanwhile stops it here.
            step(75, "starting the container").await?;
            exec.start_container(&container.id).await?;
            let state = observe(d, task, &exec, &container.id).await?;
            started(task.kind, &ctx, state)
        }
        TaskKind::Restart => {
            let id = ctx
                .container_id
                .clone()
                .ok_or_else(|| StepError::Fail("the machine has no container to restart; reinstall it".into()))?;
            // The volume's block device is checked (and re-attached after a
            // host reboot) before every start.
            step(20, "checking the data volume").await?;
            exec.ensure_volume(&ctx.spec).await?;
            step(40, "restarting the container").await?;
            exec.restart_container(&id).await?;
            let state = observe(d, task, &exec, &id).await?;
            started(task.kind, &ctx, state)
        }
        TaskKind::Delete => {
            step(30, "stopping and removing the container").await?;
            remove_machine_containers(&exec, &ctx.spec.instance, task.machine_id, ctx.container_id.as_deref()).await?;
            if !task.keep_volume {
                step(60, "removing the data volume").await?;
                exec.remove_volume(&ctx.spec.volume_name).await?;
            }
            step(90, "returning the GPUs").await?;
            let kept = if task.keep_volume { format!("; volume {} kept", ctx.spec.volume_name) } else { String::new() };
            let held = before.held;
            run::deleted(
                &d.pool,
                lease,
                task.machine_id,
                task.keep_volume,
                &format!("deleted; {held} GPU(s) returned to the group's quota{kept}"),
            )
            .await?;
            Ok(Done::Recorded)
        }
        TaskKind::Snapshot | TaskKind::Reclaim | TaskKind::Rebalance => {
            super::reclaim_steps::run(d, task, ctx, &exec).await
        }
    }
}

/// The outcome of a create, restore, reinstall or restart whose container
/// was observed in `state`: also what a task resumed after that
/// observation records ([`super::resumed`]).
pub(super) fn started(kind: TaskKind, ctx: &context::MachineContext, state: MachineState) -> Result<Done, StepError> {
    let node = &ctx.node_name;
    if kind == TaskKind::Restart {
        return match state {
            MachineState::Running => Ok(Done::Succeeded(format!("restarted on {node}"))),
            _ => Err(StepError::Fail(format!("the container did not come back (now {state})"))),
        };
    }
    // A job may well have finished already; the watcher takes it from here.
    if state != MachineState::Running && !(ctx.is_job && state == MachineState::Stopped) {
        return Err(StepError::Fail(format!("the container did not stay running (now {state})")));
    }
    let verb = match kind {
        TaskKind::Create => "created",
        TaskKind::Restore => "restored from its snapshot (data volume kept)",
        _ => "reinstalled (data volume kept)",
    };
    Ok(Done::Succeeded(format!("{verb}; running on {node}")))
}

/// Reads the container's real state into the machine row (and, in the same
/// commit, into the task's progress: see [`run::observed`]).
pub(super) async fn observe(
    d: &Dispatcher,
    task: &ClaimedTask,
    exec: &Executor,
    container_id: &str,
) -> Result<MachineState, StepError> {
    let state = exec.inspect_container(container_id).await?;
    let (machine_state, exit_code, message) = match state.status {
        ContainerStatus::Running => (MachineState::Running, None, String::new()),
        ContainerStatus::Exited { code } => {
            (MachineState::Stopped, Some(code), format!("container exited with code {code}"))
        }
        ContainerStatus::Missing => (MachineState::Failed, None, "container not found".to_string()),
        other => (MachineState::Failed, None, format!("container is {other:?}")),
    };
    run::observed(&d.pool, &task.lease, task.machine_id, machine_state, exit_code, &message).await?;
    d.checkpoint(task, "observed")?;
    Ok(machine_state)
}

/// Stops (with a grace period) and removes the machine's container, and
/// any other container labelled for it, e.g. one left by a crash between
/// creating it and recording its id.
pub async fn remove_machine_containers(
    exec: &Executor,
    instance: &str,
    machine_id: i64,
    known: Option<&str>,
) -> Result<(), ExecError> {
    if let Some(id) = known {
        exec.remove_container(id).await?;
    }
    for c in exec.list_managed(instance).await? {
        if c.machine_id == Some(machine_id) {
            exec.remove_container(&c.id).await?;
        }
    }
    Ok(())
}

/// A job whose compute task was cancelled while its machine was being made
/// ends here, before its command starts: the create fails as cancelled,
/// which removes what it made and ends the task `cancelled`.
async fn refuse_if_job_cancelled(d: &Dispatcher, machine_id: i64) -> Result<(), StepError> {
    if crate::transitions::compute::cancel_requested(&d.pool, machine_id).await? {
        return Err(StepError::Fail("cancelled before its command started".into()));
    }
    Ok(())
}

/// The job's recorded container, if it has started (running or exited).
async fn started_job_container(exec: &Executor, known: Option<&str>) -> Result<Option<String>, StepError> {
    let Some(id) = known else { return Ok(None) };
    Ok(match exec.inspect_container(id).await?.status {
        ContainerStatus::Running | ContainerStatus::Exited { .. } => Some(id.to_string()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_database_retries_the_task_and_other_errors_fail_it() {
        let busy = PlatformError::Database(sqlx::Error::PoolTimedOut);
        assert!(matches!(StepError::from(busy), StepError::Busy(m) if m.contains("pool timed out")));
        let missing = PlatformError::Database(sqlx::Error::RowNotFound);
        assert!(matches!(StepError::from(missing), StepError::Fail(_)), "a missing row is no better on the next try");
        assert!(matches!(StepError::from(PlatformError::Conflict("no".into())), StepError::Fail(m) if m == "no"));
        assert!(matches!(StepError::from(PlatformError::LeaseLost("gone".into())), StepError::LeaseLost(_)));
    }
}
