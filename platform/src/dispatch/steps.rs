//! The steps of each operation. Every step is idempotent, so a task that
//! is retried or resumed after a crash simply runs from the start again.

use super::{context, ClaimedTask, Dispatcher};
use crate::{
    audit,
    executor::{ContainerStatus, ExecError, Executor},
    machines::{release_gpus, set_task_progress},
    now, PlatformError,
};
use gantry_core::task::{machine_state_for, MachineState, TaskKind};

pub enum StepError {
    /// The engine could not be reached: try again later.
    Retry(String),
    Fail(String),
}

impl From<ExecError> for StepError {
    fn from(e: ExecError) -> Self {
        if e.is_retryable() {
            StepError::Retry(e.to_string())
        } else {
            StepError::Fail(e.to_string())
        }
    }
}

impl From<PlatformError> for StepError {
    fn from(e: PlatformError) -> Self {
        StepError::Fail(e.to_string())
    }
}

/// Runs `task` and returns the message for its success.
pub async fn run(d: &Dispatcher, task: &ClaimedTask) -> Result<String, StepError> {
    let ctx = context::load(&d.pool, task.machine_id, task.id).await?;
    let exec = d.fleet.executor(&d.pool, ctx.node_id).await?;
    set_machine(d, task.machine_id, machine_state_for(task.kind), None, "").await?;
    let progress = |pct: i64, msg: &'static str| async move { set_task_progress(&d.pool, task.id, pct, msg).await };

    match task.kind {
        TaskKind::Create | TaskKind::Reinstall => {
            progress(10, "preparing the data volume").await?;
            let volume = exec.ensure_volume(&ctx.spec).await?;
            sqlx::query("UPDATE machines SET volume_enforced = ? WHERE id = ?")
                .bind(volume.size_enforced)
                .bind(task.machine_id)
                .execute(&d.pool)
                .await
                .map_err(PlatformError::from)?;
            progress(30, "removing any previous container").await?;
            remove_machine_containers(&exec, &ctx.spec.instance, task.machine_id, ctx.container_id.as_deref()).await?;
            progress(50, "creating the container").await?;
            let container = exec.create_container(&ctx.spec).await?;
            set_container(d, task.machine_id, Some(&container.id)).await?;
            progress(75, "starting the container").await?;
            exec.start_container(&container.id).await?;
            let state = observe(d, &exec, task.machine_id, &container.id).await?;
            if state != MachineState::Running {
                return Err(StepError::Fail(format!("the container did not stay running (now {state})")));
            }
            let verb = if task.kind == TaskKind::Create { "created" } else { "reinstalled (data volume kept)" };
            Ok(format!("{verb}; running on {}", ctx.node_name))
        }
        TaskKind::Restart => {
            let id = ctx.container_id.clone().ok_or_else(|| StepError::Fail("the machine has no container to restart".into()))?;
            progress(30, "restarting the container").await?;
            exec.restart_container(&id).await?;
            let state = observe(d, &exec, task.machine_id, &id).await?;
            if state != MachineState::Running {
                return Err(StepError::Fail(format!("the container did not come back (now {state})")));
            }
            Ok(format!("restarted on {}", ctx.node_name))
        }
        TaskKind::Delete => {
            progress(30, "removing the container").await?;
            remove_machine_containers(&exec, &ctx.spec.instance, task.machine_id, ctx.container_id.as_deref()).await?;
            if !task.keep_volume {
                progress(60, "removing the data volume").await?;
                exec.remove_volume(&ctx.spec.volume_name).await?;
            }
            progress(90, "returning the GPUs").await?;
            let mut tx = d.pool.begin_with("BEGIN IMMEDIATE").await.map_err(PlatformError::from)?;
            let refunded = release_gpus(&mut tx, task.machine_id).await?;
            sqlx::query("UPDATE machines SET state = 'deleted', container_id = NULL, message = ?, updated_at = ? WHERE id = ?")
                .bind(if task.keep_volume { "deleted; volume kept" } else { "deleted" })
                .bind(now())
                .bind(task.machine_id)
                .execute(&mut *tx)
                .await
                .map_err(PlatformError::from)?;
            audit::record(&mut *tx, None, "machine.deleted", &format!("machine {}: {refunded} GPU(s) returned to group {}", ctx.spec.name, ctx.spec.group)).await?;
            tx.commit().await.map_err(PlatformError::from)?;
            let volume = if task.keep_volume { format!("; volume {} kept", ctx.spec.volume_name) } else { String::new() };
            Ok(format!("deleted; {refunded} GPU(s) returned to the group's quota{volume}"))
        }
        TaskKind::Snapshot => Err(StepError::Fail("snapshots are not supported yet".into())),
    }
}

/// What the machine shows after a task failed for good. A create that
/// never ran gives its GPUs back; other operations report what Docker says.
pub async fn on_failure(d: &Dispatcher, task: &ClaimedTask, message: &str) -> Result<(), PlatformError> {
    match task.kind {
        TaskKind::Create => {
            let mut tx = d.pool.begin_with("BEGIN IMMEDIATE").await?;
            let refunded = release_gpus(&mut tx, task.machine_id).await?;
            sqlx::query("UPDATE machines SET state = 'failed', message = ?, updated_at = ? WHERE id = ?")
                .bind(format!("{message}; {refunded} GPU(s) returned to the group's quota"))
                .bind(now())
                .bind(task.machine_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        _ => {
            set_machine(d, task.machine_id, MachineState::Failed, None, message).await?;
        }
    }
    Ok(())
}

/// Reads the container's real state into the machine row.
async fn observe(d: &Dispatcher, exec: &Executor, machine_id: i64, container_id: &str) -> Result<MachineState, StepError> {
    let state = exec.inspect_container(container_id).await?;
    let (machine_state, exit_code, message) = match state.status {
        ContainerStatus::Running => (MachineState::Running, None, String::new()),
        ContainerStatus::Exited { code } => (MachineState::Stopped, Some(code), format!("container exited with code {code}")),
        ContainerStatus::Missing => (MachineState::Failed, None, "container not found".to_string()),
        other => (MachineState::Failed, None, format!("container is {other:?}")),
    };
    set_machine(d, machine_id, machine_state, exit_code, &message).await?;
    Ok(machine_state)
}

async fn remove_machine_containers(exec: &Executor, instance: &str, machine_id: i64, known: Option<&str>) -> Result<(), ExecError> {
    if let Some(id) = known {
        exec.remove_container(id).await?;
    }
    // Also any container left labelled for this machine, e.g. by a crash
    // between creating it and recording its id.
    for c in exec.list_managed(instance).await? {
        if c.machine_id == Some(machine_id) {
            exec.remove_container(&c.id).await?;
        }
    }
    Ok(())
}

async fn set_machine(d: &Dispatcher, machine_id: i64, state: MachineState, exit_code: Option<i64>, message: &str) -> Result<(), PlatformError> {
    sqlx::query("UPDATE machines SET state = ?, exit_code = ?, message = ?, updated_at = ? WHERE id = ? AND state <> 'deleted'")
        .bind(state.as_str())
        .bind(exit_code)
        .bind(message)
        .bind(now())
        .bind(machine_id)
        .execute(&d.pool)
        .await?;
    Ok(())
}

async fn set_container(d: &Dispatcher, machine_id: i64, container_id: Option<&str>) -> Result<(), PlatformError> {
    sqlx::query("UPDATE machines SET container_id = ?, updated_at = ? WHERE id = ?")
        .bind(container_id)
        .bind(now())
        .bind(machine_id)
        .execute(&d.pool)
        .await?;
    Ok(())
}
