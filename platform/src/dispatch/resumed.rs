//! A task resumed after its runner had recorded the container's state but
//! stopped before recording the outcome (a crash, a shutdown past its
//! grace, a database that stalled that last write until the lease ran
//! out). The container it made or restarted is the outcome: running the
//! steps again would fail a create (a running machine cannot become
//! `creating`) and remove a working container — for a compute task, kill a
//! command that had started — or restart a machine a second time.

use super::{context, reclaim_steps, steps, ClaimedTask, Dispatcher};
use crate::{
    transitions::{machine, snapshot},
    PlatformError,
};
use gantry_core::task::TaskKind;
use steps::{Done, StepError};

pub(super) async fn record_observed(d: &Dispatcher, task: &ClaimedTask) -> Result<Done, StepError> {
    let mut conn = d.pool.acquire().await.map_err(PlatformError::from)?;
    let state = machine::current(&mut conn, task.machine_id).await?.state;
    tracing::info!(task = task.id, %state, "resumed after its container's state was recorded; recording the outcome");
    match task.kind {
        TaskKind::Rebalance => {
            let (mut to, why) = reclaim_steps::planned_move(&snapshot::payload(&mut conn, task.id).await?);
            let mut held: Vec<i64> = sqlx::query_scalar("SELECT gpu_id FROM machine_gpus WHERE machine_id = ?")
                .bind(task.machine_id)
                .fetch_all(&mut *conn)
                .await
                .map_err(PlatformError::from)?;
            drop(conn);
            to.sort_unstable();
            held.sort_unstable();
            reclaim_steps::rebalanced(d, task, state, held == to, &why).await
        }
        kind => {
            drop(conn);
            let ctx = context::load(&d.pool, task.machine_id, task.id).await?;
            steps::started(kind, &ctx, state)
        }
    }
}
