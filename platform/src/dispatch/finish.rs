//! Recording how a task ended. A failed create gives its GPUs back in the
//! same commit that fails the task, after removing its container (or,
//! when the engine is unreachable, leaving it to the collector: a container
//! whose machine holds nothing is collected). A delete that gives up on an
//! unreachable engine still closes the machine and refunds. GPUs whose
//! container was left behind are offered again only after the collector
//! removed it (`transitions::machine::release_as`).

use super::{
    steps::{self, Done, StepError},
    ClaimedTask, Dispatcher, MAX_ATTEMPTS,
};
use crate::{
    now,
    transitions::{machine::Container, run},
    PlatformError,
};
use gantry_core::task::{backoff_secs, TaskKind};
use std::time::Duration;

/// Tries to write the outcome before leaving it to lease expiry.
const RECORD_TRIES: u32 = 5;

pub async fn record(d: &Dispatcher, task: &ClaimedTask, outcome: Result<Done, StepError>) {
    let mut delay = Duration::from_millis(200);
    for attempt in 1..=RECORD_TRIES {
        match write(d, task, &outcome).await {
            Ok(()) => return,
            Err(PlatformError::LeaseLost(m)) => {
                tracing::warn!(task = task.id, "outcome not recorded: {m}");
                return;
            }
            Err(e) if attempt < RECORD_TRIES => {
                tracing::warn!(task = task.id, error = %e, attempt, "recording the outcome failed; trying again");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            // The lease runs out and another dispatcher (or this one)
            // resumes the task: it is never left running for ever.
            Err(e) => {
                tracing::error!(task = task.id, error = %e, "recording the outcome failed; the task resumes when its lease expires")
            }
        }
    }
}

async fn write(d: &Dispatcher, task: &ClaimedTask, outcome: &Result<Done, StepError>) -> Result<(), PlatformError> {
    let lease = &task.lease;
    match outcome {
        Ok(Done::Recorded) => Ok(()),
        Ok(Done::Succeeded(message)) => {
            run::succeed(&d.pool, lease, message).await?;
            tracing::info!(task = task.id, kind = %task.kind, machine = task.machine_id, "{message}");
            Ok(())
        }
        Err(StepError::LeaseLost(m)) => {
            tracing::warn!(task = task.id, "stopped: {m}");
            Ok(())
        }
        Err(StepError::Abandoned(step)) => {
            tracing::warn!(task = task.id, step, "abandoned by the step hook (simulated crash)");
            Ok(())
        }
        Err(StepError::Retry(reason) | StepError::Busy(reason)) if task.attempts < MAX_ATTEMPTS => {
            let delay = backoff_secs(task.attempts as u32);
            let message = format!("{reason}; retry {} of {MAX_ATTEMPTS} in {delay} s", task.attempts + 1);
            run::retry(&d.pool, lease, now() + delay, &message).await?;
            tracing::warn!(task = task.id, "{message}");
            Ok(())
        }
        Err(StepError::Retry(reason)) => {
            let message = format!("{reason} (gave up after {} attempts)", task.attempts);
            give_up(d, task, &message, true).await
        }
        // Not the engine's fault: a delete must not be recorded as done
        // with its container left to the collector.
        Err(StepError::Busy(reason)) => {
            let message = format!("{reason} (gave up after {} attempts)", task.attempts);
            give_up(d, task, &message, false).await
        }
        Err(StepError::Fail(reason)) => give_up(d, task, reason, false).await,
    }
}

async fn give_up(d: &Dispatcher, task: &ClaimedTask, message: &str, unreachable: bool) -> Result<(), PlatformError> {
    let lease = &task.lease;
    // The engine clean-up below runs before the fenced write: a runner
    // that lost its task must not remove what its successor made.
    if !crate::transitions::lease::held(&d.pool, lease).await? {
        tracing::warn!(task = task.id, "not giving up: the task's lease went to another runner");
        return Ok(());
    }
    match task.kind {
        TaskKind::Create => {
            let container = remove_containers(d, task).await;
            // A job machine's delete is queued in this commit too (see
            // `transitions::compute::machine_released`): nobody else may.
            run::fail(&d.pool, lease, task.machine_id, message, Some(container)).await?;
        }
        // A reclaim past its commit (it reached "removing the container",
        // so the image is there) whose engine then went silent ends
        // reclaimed: its image is the restore point, and the container, if
        // the engine still has it, goes to the collector with its GPUs. (An
        // engine that answered no — the container could not be removed —
        // leaves the machine running as it was, below.)
        TaskKind::Reclaim if unreachable && image_made(d, task).await? => {
            let snapshot_id = {
                let mut conn = d.pool.acquire().await?;
                crate::transitions::snapshot::payload(&mut conn, task.id)
                    .await?
                    .get("snapshot_id")
                    .and_then(|v| v.as_i64())
            };
            match snapshot_id {
                Some(snapshot_id) => {
                    let container = remove_containers(d, task).await;
                    crate::transitions::reclaim::reclaimed_as(
                        &d.pool,
                        lease,
                        task.machine_id,
                        snapshot_id,
                        0,
                        container,
                    )
                    .await?;
                }
                None => crate::transitions::snapshot::failed(&d.pool, lease, message).await?,
            }
        }
        // The machine stays as it was; only the snapshot failed.
        TaskKind::Snapshot | TaskKind::Reclaim => {
            crate::transitions::snapshot::failed(&d.pool, lease, message).await?;
        }
        TaskKind::Restore => {
            let container = remove_containers(d, task).await;
            crate::transitions::reclaim::restore_given_up(&d.pool, lease, task.machine_id, message, container).await?;
        }
        TaskKind::Delete if unreachable => {
            let note = format!(
                "deleted; its node's engine did not answer ({message}); GPUs returned to the group's quota, \
                 the container{} is removed when the engine answers again",
                if task.keep_volume { "" } else { " and volume" }
            );
            run::deleted_leaving_container(&d.pool, lease, task.machine_id, task.keep_volume, &note).await?;
        }
        _ => {
            run::fail(&d.pool, lease, task.machine_id, message, None).await?;
        }
    }
    tracing::warn!(task = task.id, kind = %task.kind, "failed: {message}");
    Ok(())
}

/// Whether a reclaim got past its commit: its progress reached the step
/// that removes the container, which follows only an image made (or found).
async fn image_made(d: &Dispatcher, task: &ClaimedTask) -> Result<bool, PlatformError> {
    let progress: i64 =
        sqlx::query_scalar("SELECT progress FROM tasks WHERE id = ?").bind(task.id).fetch_one(&d.pool).await?;
    Ok(progress >= REMOVING_PROGRESS)
}

/// The progress a reclaim shows once it removes the container (see `reclaim_steps`).
pub(super) const REMOVING_PROGRESS: i64 = 60;

/// The invariant: no GPUs without removing the container. When the engine
/// cannot be asked, the container is left to the collector, and so are the
/// GPUs it is pinned to: the group gets them back now, new machines only
/// once the collector has seen the engine without it.
async fn remove_containers(d: &Dispatcher, task: &ClaimedTask) -> Container {
    let removed = match super::context::load(&d.pool, task.machine_id, task.id).await {
        Ok(ctx) => match d.fleet.executor(&d.pool, ctx.node_id).await {
            Ok(exec) => steps::remove_machine_containers(
                &exec,
                &ctx.spec.instance,
                task.machine_id,
                ctx.container_id.as_deref(),
            )
            .await
            .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    };
    match removed {
        Ok(()) => Container::Removed,
        Err(e) => {
            tracing::warn!(task = task.id, kind = %task.kind, error = %e, "container left to the collector, and its GPUs with it");
            Container::LeftToCollector
        }
    }
}
