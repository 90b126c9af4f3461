//! The compute watcher: notices a job's container ending (or its time
//! limit, or a cancel), keeps the end of its output and its exit code, and
//! asks for the job machine's delete — whose commit gives the GPUs back and
//! finishes the task (see `transitions::compute::machine_released`). Any
//! server may run it; a second one asking for the same delete is refused
//! as busy and changes nothing.

use crate::{
    accounts, db::Pool, executor::ContainerStatus, fleet::Fleet, machines::{self, Admissions, OperationRequest}, now, transitions,
    PlatformError,
};
use gantry_core::task::TaskKind;
use std::time::Duration;

/// Lines of output kept with a finished task.
const TAIL_LINES: usize = 200;

type Watched = (i64, i64, i64, Option<i64>, bool, i64, String, Option<String>, i64);

/// One pass; returns how many jobs were finished or stopped.
pub async fn watch_once(pool: &Pool, fleet: &Fleet) -> Result<usize, PlatformError> {
    cancel_unstarted(pool).await?;
    let rows: Vec<Watched> = sqlx::query_as(
        "SELECT c.id, c.machine_id, c.time_limit_secs, c.started_at, c.cancel_requested, c.requester_id, c.message, m.container_id, m.node_id
         FROM compute_tasks c JOIN machines m ON m.id = c.machine_id
         WHERE c.state = 'running' AND c.exit_code IS NULL AND m.node_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.state IN ('pending', 'scheduled', 'running'))",
    )
    .fetch_all(pool)
    .await?;
    let mut finished = 0;
    for (id, machine_id, limit, started_at, cancel, requester, message, container, node_id) in rows {
        let exec = fleet.executor(pool, node_id).await?;
        let Some(container) = container else { continue };
        let status = match exec.inspect_container(&container).await {
            Ok(s) => s.status,
            Err(e) => {
                tracing::warn!(task = id, error = %e, "compute watcher: engine not answering");
                continue;
            }
        };
        let over_time = started_at.is_some_and(|s| now() >= s + limit);
        let why = match status {
            ContainerStatus::Exited { code } => format!("exited with code {code}"),
            ContainerStatus::Missing => "its container vanished".to_string(),
            _ if cancel => message,
            _ if over_time => format!("time limit of {limit} s reached; stopped"),
            _ => continue,
        };
        if !matches!(status, ContainerStatus::Exited { .. } | ContainerStatus::Missing) {
            if let Err(e) = exec.stop_container(&container).await {
                tracing::warn!(task = id, error = %e, "compute watcher: could not stop the container");
                continue;
            }
        }
        let code = match exec.inspect_container(&container).await.map(|s| s.status) {
            Ok(ContainerStatus::Exited { code }) => code,
            _ => -1,
        };
        let tail = exec.output_tail(&container, TAIL_LINES).await.unwrap_or_default();
        let mut tx = transitions::begin(pool).await?;
        // A time limit fails the task whatever the exit code the stop left.
        let code = if over_time && !cancel && code == 0 { 124 } else { code };
        transitions::compute::exited(&mut tx, id, code, &tail, &why).await?;
        tx.commit().await?;
        let requester = accounts::user_by_id(pool, requester).await?.ok_or_else(|| PlatformError::NotFound("requester".into()))?;
        match machines::request_operation(pool, &requester, OperationRequest { machine_id, kind: TaskKind::Delete, keep_volume: false }).await {
            Ok(_) | Err(PlatformError::Conflict(_)) => finished += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(finished)
}

/// A cancel of a task whose machine has not started yet cancels the
/// machine's create (which refunds, and so ends the compute task).
async fn cancel_unstarted(pool: &Pool) -> Result<(), PlatformError> {
    let waiting: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT t.id, c.requester_id FROM compute_tasks c JOIN tasks t ON t.machine_id = c.machine_id AND t.kind = 'create'
         WHERE c.state = 'scheduled' AND c.cancel_requested = 1 AND t.state IN ('pending', 'scheduled')",
    )
    .fetch_all(pool)
    .await?;
    for (task_id, requester) in waiting {
        if let Some(user) = accounts::user_by_id(pool, requester).await? {
            match transitions::task::cancel(pool, &user, task_id).await {
                Ok(()) | Err(PlatformError::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// The matcher and the watcher, every `period` until the process ends.
pub async fn run_loops(pool: Pool, fleet: Fleet, admissions: Admissions, period: Duration) {
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        if let Err(e) = watch_once(&pool, &fleet).await {
            tracing::error!(error = %e, "compute watcher failed");
        }
        if let Err(e) = super::evaluate_queue(&pool, &admissions).await {
            tracing::error!(error = %e, "compute matcher failed");
        }
    }
}
