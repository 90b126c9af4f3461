//! The life of a compute task (a batch job): like an operation task, but a
//! running job can be cancelled (its container is stopped), and a job whose
//! machine could not be admitted yet simply stays pending.

use crate::task::TaskState;

pub fn can_transition(from: TaskState, to: TaskState) -> bool {
    use TaskState::*;
    matches!(
        (from, to),
        (Pending, Scheduled | Failed | Cancelled)
            | (Scheduled, Running | Failed | Cancelled)
            | (Running, Succeeded | Failed | Cancelled)
    )
}

/// How a finished job is recorded: a cancel wins, then the exit code.
pub fn outcome(cancel_requested: bool, exit_code: Option<i64>) -> TaskState {
    match (cancel_requested, exit_code) {
        (true, _) => TaskState::Cancelled,
        (false, Some(0)) => TaskState::Succeeded,
        _ => TaskState::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_job_can_be_cancelled_but_finished_ones_stay() {
        assert!(can_transition(TaskState::Running, TaskState::Cancelled));
        for done in [TaskState::Succeeded, TaskState::Failed, TaskState::Cancelled] {
            assert!(TaskState::ALL.iter().all(|to| !can_transition(done, *to)), "{done}");
        }
        assert!(!can_transition(TaskState::Pending, TaskState::Running), "a job is scheduled before it runs");
    }

    #[test]
    fn outcome_follows_cancel_then_exit_code() {
        assert_eq!(outcome(false, Some(0)), TaskState::Succeeded);
        assert_eq!(outcome(false, Some(3)), TaskState::Failed);
        assert_eq!(outcome(false, None), TaskState::Failed);
        assert_eq!(outcome(true, Some(0)), TaskState::Cancelled);
    }
}
