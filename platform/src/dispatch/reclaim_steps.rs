//! The steps of snapshot, reclaim and rebalance tasks (restore shares the
//! create steps). Idempotent like every step: committing again overwrites
//! the same tag, removing a removed container is a no-op, and the GPU swap
//! recognises a swap already made.

use super::{
    context::{self, MachineContext},
    steps::{observe, remove_machine_containers, Done, StepError},
    ClaimedTask, Dispatcher,
};
use crate::{
    executor::{ContainerStatus, ExecError, Executor},
    transitions::{rebalance, reclaim, snapshot, task::progress},
    PlatformError,
};
use gantry_core::task::{MachineState, TaskKind};

pub async fn run(d: &Dispatcher, task: &ClaimedTask, ctx: MachineContext, exec: &Executor) -> Result<Done, StepError> {
    let lease = &task.lease;
    let step = |pct: i64, msg: &'static str| async move {
        progress(&d.pool, lease, pct, msg).await?;
        d.checkpoint(task, msg)
    };
    let payload = {
        let mut conn = d.pool.acquire().await.map_err(PlatformError::from)?;
        snapshot::payload(&mut conn, task.id).await?
    };
    let snapshot_id = payload.get("snapshot_id").and_then(|v| v.as_i64());
    match task.kind {
        TaskKind::Snapshot => {
            let id = ctx.container_id.clone().ok_or_else(|| {
                StepError::Fail("the machine has no container to snapshot; reinstall it first".into())
            })?;
            let snapshot_id = snapshot_id.ok_or_else(|| StepError::Fail("the task names no snapshot".into()))?;
            step(30, "committing the container to an image").await?;
            let image = exec.commit_container(&id, &snapshot::image_ref(&ctx.spec.instance, snapshot_id)).await?;
            snapshot::taken(&d.pool, lease, task.machine_id, snapshot_id, image.size_bytes).await?;
            Ok(Done::Recorded)
        }
        TaskKind::Reclaim => {
            let snapshot_id = snapshot_id.ok_or_else(|| StepError::Fail("the task names no snapshot".into()))?;
            let reference = snapshot::image_ref(&ctx.spec.instance, snapshot_id);
            // The warning may have been withdrawn, extended or exempted
            // since the reclaim was queued: it stops while the machine is
            // still whole (its container there), and not once it is gone.
            let whole = match &ctx.container_id {
                Some(id) => exec.inspect_container(id).await?.status != ContainerStatus::Missing,
                None => false,
            };
            if whole && called_off(d, task, exec, &reference).await? {
                return Ok(Done::Recorded);
            }
            // A resumed task may find the container gone and the image made:
            // removing the container does not forget its id (only the
            // final commit does), so a missing container is looked past
            // to the image, which is what the reclaim needs.
            let committed = match &ctx.container_id {
                Some(id) if whole => {
                    step(20, "snapshotting the idle machine").await?;
                    match exec.commit_container(id, &reference).await {
                        Ok(image) => Some(image),
                        Err(ExecError::NotFound(_)) => None,
                        Err(e) => return Err(e.into()),
                    }
                }
                _ => None,
            };
            // Asked again: committing takes a while, and a busy GPU or an
            // exemption in the meantime still saves the machine.
            if committed.is_some() && called_off(d, task, exec, &reference).await? {
                return Ok(Done::Recorded);
            }
            let image = match committed {
                Some(image) => image,
                None => exec
                    .image_info(&reference)
                    .await?
                    .ok_or_else(|| StepError::Fail("the machine has no container to snapshot".into()))?,
            };
            // From here a runner that gives up ends the reclaim all the same
            // (`finish::image_made`): the image is made.
            step(super::finish::REMOVING_PROGRESS, "removing the container").await?;
            remove_machine_containers(exec, &ctx.spec.instance, task.machine_id, ctx.container_id.as_deref()).await?;
            step(90, "returning the GPUs").await?;
            reclaim::reclaimed(&d.pool, lease, task.machine_id, snapshot_id, image.size_bytes).await?;
            Ok(Done::Recorded)
        }
        TaskKind::Rebalance => {
            let (to, why) = planned_move(&payload);
            // The owner may have opted out since the move was queued: it
            // stops while the container still runs where it was.
            let running = match &ctx.container_id {
                Some(id) => exec.inspect_container(id).await?.status == ContainerStatus::Running,
                None => false,
            };
            if running && rebalance::call_off_if_opted_out(&d.pool, lease, task.machine_id, &to).await? {
                return Ok(Done::Recorded);
            }
            step(10, "checking the data volume").await?;
            exec.ensure_volume(&ctx.spec).await?;
            step(30, "removing the container from the hot GPUs").await?;
            remove_machine_containers(exec, &ctx.spec.instance, task.machine_id, ctx.container_id.as_deref()).await?;
            step(45, "moving to the cooler GPUs").await?;
            // Taken meanwhile: the machine comes back on the GPUs it had.
            let moved = match rebalance::swap(&d.pool, lease, task.machine_id, &to).await {
                Ok(()) => true,
                Err(PlatformError::Conflict(m)) => {
                    tracing::warn!(task = task.id, "rebalance target gone ({m}); recreating on the same GPUs");
                    false
                }
                Err(e) => return Err(e.into()),
            };
            let ctx = context::load(&d.pool, task.machine_id, task.id).await?;
            step(60, "creating the container on the new GPUs").await?;
            let container = exec.create_container(&ctx.spec).await?;
            crate::transitions::run::container_created(&d.pool, lease, task.machine_id, &container.id).await?;
            step(80, "starting the container").await?;
            exec.start_container(&container.id).await?;
            let state = observe(d, task, exec, &container.id).await?;
            rebalanced(d, task, state, moved, &why).await
        }
        other => Err(StepError::Fail(format!("{other} is not a snapshot, reclaim or rebalance task"))),
    }
}

/// Ends the reclaim if it is no longer wanted (see
/// [`reclaim::call_off_if_withdrawn`]); the image this or an earlier
/// attempt committed is then nobody's and goes (best effort: a leftover
/// tag only takes disk).
async fn called_off(d: &Dispatcher, task: &ClaimedTask, exec: &Executor, reference: &str) -> Result<bool, StepError> {
    if !reclaim::call_off_if_withdrawn(&d.pool, &task.lease, task.machine_id).await? {
        return Ok(false);
    }
    match exec.remove_image(reference).await {
        Ok(()) | Err(ExecError::NotFound(_)) => {}
        Err(e) => {
            tracing::warn!(task = task.id, error = %e, image = %reference, "image of a called-off reclaim not removed")
        }
    }
    Ok(true)
}

/// The end of a rebalance whose container was observed in `state`: also
/// what one resumed after that observation records ([`super::resumed`]).
pub(super) async fn rebalanced(
    d: &Dispatcher,
    task: &ClaimedTask,
    state: MachineState,
    moved: bool,
    why: &str,
) -> Result<Done, StepError> {
    if state != MachineState::Running {
        return Err(StepError::Fail(format!("the container did not stay running on the new GPUs (now {state})")));
    }
    let why = if moved {
        why.to_string()
    } else {
        format!("not moved (the cooler GPUs were taken meanwhile); back on its GPUs. Reason for the attempt: {why}")
    };
    rebalance::done(&d.pool, &task.lease, task.machine_id, &why).await?;
    Ok(Done::Recorded)
}

/// The GPUs a rebalance moves its machine to, and why (its task's payload).
pub(super) fn planned_move(payload: &serde_json::Value) -> (Vec<i64>, String) {
    let to = payload.get("to").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default();
    let why = payload.get("why").and_then(|v| v.as_str()).unwrap_or("hot GPU").to_string();
    (to, why)
}
