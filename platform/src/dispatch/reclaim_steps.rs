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
    executor::{ContainerStatus, ExecError, Executor, ImageInfo},
    transitions::{rebalance, reclaim, snapshot},
    PlatformError,
};
use gantry_core::task::{MachineState, TaskKind};

/// One of the three tasks that commit or move a running machine; a kind
/// that is none of them is this runner's mistake, failed as such.
pub async fn run(d: &Dispatcher, task: &ClaimedTask, ctx: MachineContext, exec: &Executor) -> Result<Done, StepError> {
    let run = Run { d, task, exec };
    let payload = run.payload().await?;
    let snapshot_id = payload.get("snapshot_id").and_then(|v| v.as_i64());
    match task.kind {
        TaskKind::Snapshot => run.snapshot(&ctx, snapshot_id).await,
        TaskKind::Reclaim => run.reclaim(&ctx, snapshot_id, reclaim::is_stop(&payload)).await,
        TaskKind::Rebalance => run.rebalance(&ctx, &payload).await,
        other => Err(StepError::Fail(format!("{other} is not a snapshot, reclaim or rebalance task"))),
    }
}

/// What every step of one task needs, so each step names only its own.
struct Run<'a> {
    d: &'a Dispatcher,
    task: &'a ClaimedTask,
    exec: &'a Executor,
}

impl Run<'_> {
    /// A step boundary (see `Dispatcher::boundary`).
    async fn step(&self, pct: i64, msg: &'static str) -> Result<(), StepError> {
        self.d.boundary(self.task, pct, msg).await
    }

    /// Read on a connection of its own, given back before the engine is
    /// asked anything.
    async fn payload(&self) -> Result<serde_json::Value, StepError> {
        let mut conn = self.d.pool.acquire().await.map_err(PlatformError::from)?;
        Ok(snapshot::payload(&mut conn, self.task.id).await?)
    }

    /// The machine's container as the engine has it now (`None`: no
    /// container recorded): a call-off is only safe while it is whole.
    async fn container_status(&self, ctx: &MachineContext) -> Result<Option<ContainerStatus>, StepError> {
        Ok(match &ctx.container_id {
            Some(id) => Some(self.exec.inspect_container(id).await?.status),
            None => None,
        })
    }

    /// A snapshot is the container committed under the snapshot's tag; the
    /// machine keeps running on its GPUs.
    async fn snapshot(&self, ctx: &MachineContext, snapshot_id: Option<i64>) -> Result<Done, StepError> {
        let id = ctx
            .container_id
            .clone()
            .ok_or_else(|| StepError::Fail("the machine has no container to snapshot; reinstall it first".into()))?;
        let snapshot_id = snapshot_id.ok_or_else(|| StepError::Fail("the task names no snapshot".into()))?;
        self.step(30, "committing the container to an image").await?;
        let image = self.exec.commit_container(&id, &snapshot::image_ref(&ctx.spec.instance, snapshot_id)).await?;
        snapshot::taken(&self.d.pool, &self.task.lease, self.task.machine_id, snapshot_id, image.size_bytes).await?;
        Ok(Done::Recorded)
    }

    /// An idle machine gives its GPUs back as an image it can be restored
    /// from, unless the reclaim is called off while the machine is whole;
    /// a `stop` (its owner's) is the same but is never called off.
    async fn reclaim(&self, ctx: &MachineContext, snapshot_id: Option<i64>, stop: bool) -> Result<Done, StepError> {
        let (d, task) = (self.d, self.task);
        let snapshot_id = snapshot_id.ok_or_else(|| StepError::Fail("the task names no snapshot".into()))?;
        let reference = snapshot::image_ref(&ctx.spec.instance, snapshot_id);
        // A person's stop was asked for: no warning, deadline or
        // exemption can call it off.
        let idle = !stop;
        // The warning may have been withdrawn, extended or exempted
        // since the reclaim was queued: it stops while the machine is
        // still whole (its container there), and not once it is gone.
        let whole = self.container_status(ctx).await?.is_some_and(|status| status != ContainerStatus::Missing);
        if idle && whole && called_off(d, task, self.exec, &reference).await? {
            return Ok(Done::Recorded);
        }
        let committed = self.commit_if_whole(ctx, whole, &reference).await?;
        // Asked again: committing takes a while, and a busy GPU or an
        // exemption in the meantime still saves the machine.
        if idle && committed.is_some() && called_off(d, task, self.exec, &reference).await? {
            return Ok(Done::Recorded);
        }
        let image = self.image_made(committed, &reference).await?;
        // From here a runner that gives up ends the reclaim all the same
        // (`finish::image_made`): the image is made.
        self.step(super::finish::REMOVING_PROGRESS, "removing the container").await?;
        remove_machine_containers(self.exec, &ctx.spec.instance, task.machine_id, ctx.container_id.as_deref()).await?;
        self.step(90, "returning the GPUs").await?;
        reclaim::reclaimed(&d.pool, &task.lease, task.machine_id, snapshot_id, image.size_bytes).await?;
        Ok(Done::Recorded)
    }

    /// A resumed task may find the container gone and the image made:
    /// removing the container does not forget its id (only the final
    /// commit does), so a missing container is looked past to the image
    /// (`None` here), which is what the reclaim needs.
    async fn commit_if_whole(
        &self,
        ctx: &MachineContext,
        whole: bool,
        reference: &str,
    ) -> Result<Option<ImageInfo>, StepError> {
        Ok(match &ctx.container_id {
            Some(id) if whole => {
                self.step(20, "saving the machine's filesystem to an image").await?;
                match self.exec.commit_container(id, reference).await {
                    Ok(image) => Some(image),
                    Err(ExecError::NotFound(_)) => None,
                    Err(e) => return Err(e.into()),
                }
            }
            _ => None,
        })
    }

    /// The image this attempt committed, or the one an earlier attempt
    /// did: without either there is nothing to restore the machine from.
    async fn image_made(&self, committed: Option<ImageInfo>, reference: &str) -> Result<ImageInfo, StepError> {
        match committed {
            Some(image) => Ok(image),
            None => self
                .exec
                .image_info(reference)
                .await?
                .ok_or_else(|| StepError::Fail("the machine has no container to snapshot".into())),
        }
    }

    /// A machine on hot GPUs moves to cooler ones: its container is made
    /// again there, on the same volume, unless its owner opted out.
    async fn rebalance(&self, ctx: &MachineContext, payload: &serde_json::Value) -> Result<Done, StepError> {
        let (d, task) = (self.d, self.task);
        let (to, why) = planned_move(payload);
        // The owner may have opted out since the move was queued: it
        // stops while the container still runs where it was.
        let running = self.container_status(ctx).await? == Some(ContainerStatus::Running);
        if running && rebalance::call_off_if_opted_out(&d.pool, &task.lease, task.machine_id, &to).await? {
            return Ok(Done::Recorded);
        }
        self.step(10, "checking the data volume").await?;
        self.exec.ensure_volume(&ctx.spec).await?;
        self.step(30, "removing the container from the hot GPUs").await?;
        remove_machine_containers(self.exec, &ctx.spec.instance, task.machine_id, ctx.container_id.as_deref()).await?;
        self.step(45, "moving to the cooler GPUs").await?;
        let moved = self.swap_gpus(&to).await?;
        let container_id = self.recreate().await?;
        let state = observe(d, task, self.exec, &container_id).await?;
        rebalanced(d, task, state, moved, &why).await
    }

    /// Whether the machine now holds the cooler GPUs: taken meanwhile, it
    /// comes back on the GPUs it had.
    async fn swap_gpus(&self, to: &[i64]) -> Result<bool, StepError> {
        match rebalance::swap(&self.d.pool, &self.task.lease, self.task.machine_id, to).await {
            Ok(()) => Ok(true),
            Err(PlatformError::Conflict(m)) => {
                tracing::warn!(task = self.task.id, "rebalance target gone ({m}); recreating on the same GPUs");
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The container is made from the machine as it is after the swap
    /// (read again: its GPUs changed), and recorded before it is started.
    async fn recreate(&self) -> Result<String, StepError> {
        let (d, task) = (self.d, self.task);
        let ctx = context::load(&d.pool, task.machine_id, task.id).await?;
        self.step(60, "creating the container on the new GPUs").await?;
        let container = self.exec.create_container(&ctx.spec).await?;
        crate::transitions::run::container_created(&d.pool, &task.lease, task.machine_id, &container.id).await?;
        self.step(80, "starting the container").await?;
        self.exec.start_container(&container.id).await?;
        Ok(container.id)
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
