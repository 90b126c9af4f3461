//! Where a task in flight gives way, at a step boundary: to a delete asked
//! for after it (`machines::make_way`), and — a compute task's create — to
//! the task's cancel, so a job cancelled while its machine is being made
//! never runs its command. Failing there is the clean way out: a create's
//! or restore's failure removes what it made and gives its GPUs back, a
//! restart's or reinstall's leaves the machine failed (deletable), a
//! snapshot's fails only the snapshot.

use super::{steps::StepError, ClaimedTask, Dispatcher};
use crate::PlatformError;
use gantry_core::task::{stopped_by_delete, TaskKind};

impl Dispatcher {
    /// A step boundary: the task's progress shown, the test hook's chance
    /// to abandon it there (as a runner that stops would), and the task's
    /// chance to give way.
    pub(super) async fn boundary(&self, task: &ClaimedTask, pct: i64, step: &'static str) -> Result<(), StepError> {
        crate::transitions::task::progress(&self.pool, &task.lease, pct, step).await?;
        self.checkpoint(task, step)?;
        if !stopped_by_delete(task.kind) {
            return Ok(());
        }
        let (delete, job_cancelled): (Option<i64>, bool) = sqlx::query_as(
            "SELECT (SELECT MIN(id) FROM tasks WHERE machine_id = ?1 AND kind = 'delete'
                       AND state IN ('pending', 'scheduled') AND id > ?2),
                    COALESCE((SELECT cancel_requested FROM compute_tasks WHERE machine_id = ?1), 0)",
        )
        .bind(task.machine_id)
        .bind(task.id)
        .fetch_one(&self.pool)
        .await
        .map_err(PlatformError::from)?;
        if let Some(delete) = delete {
            return Err(StepError::Fail(format!(
                "stopped for the machine's delete (task #{delete}), asked for meanwhile"
            )));
        }
        if job_cancelled && task.kind == TaskKind::Create {
            return Err(StepError::Fail("cancelled before its command started".into()));
        }
        Ok(())
    }
}
