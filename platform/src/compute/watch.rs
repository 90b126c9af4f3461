//! The compute watcher: notices a job's container ending (or its time
//! limit, or a cancel), keeps the end of its output and its exit code, and
//! queues the job machine's delete in the same commit — whose own commit
//! gives the GPUs back and finishes the task (see
//! `transitions::compute::machine_released`). Any server may run it; a
//! second one queueing the same delete finds the machine busy and changes
//! nothing.

use crate::{
    accounts, db::Pool, executor::ContainerStatus, fleet::Fleet, machines::Admissions, now, transitions, PlatformError,
};
use std::{collections::BTreeMap, time::Duration};

/// Lines of output kept with a finished task.
const TAIL_LINES: usize = 200;

/// How long one pass spends on one node's jobs. The nodes are watched side
/// by side and each node's jobs one after another, so an engine that takes
/// connections but never answers (up to the executor's 30 s per call,
/// several calls per job) holds up only its own jobs, and only until here:
/// the rest wait for the next pass.
const NODE_BUDGET: Duration = Duration::from_secs(20);

type Watched = (i64, i64, i64, Option<i64>, bool, String, Option<String>, i64, Option<i64>);

/// One pass; returns how many jobs had their machine's delete queued.
pub async fn watch_once(pool: &Pool, fleet: &Fleet) -> Result<usize, PlatformError> {
    cancel_unstarted(pool).await?;
    // A job whose exit is recorded but whose machine has no open delete is
    // taken up again: its delete was refused when tried (the machine was
    // busy), failed on the engine, or was cancelled by an admin. Each retry
    // waits out a backoff (see `transitions::compute::delete_job_machine`).
    let rows: Vec<Watched> = sqlx::query_as(
        "SELECT c.id, c.machine_id, c.time_limit_secs, c.started_at, c.cancel_requested, c.message, m.container_id, m.node_id, c.exit_code
         FROM compute_tasks c JOIN machines m ON m.id = c.machine_id
         WHERE c.state = 'running' AND m.node_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.state IN ('pending', 'scheduled', 'running'))",
    )
    .fetch_all(pool)
    .await?;
    let mut by_node: BTreeMap<i64, Vec<Watched>> = BTreeMap::new();
    for row in rows {
        by_node.entry(row.7).or_default().push(row);
    }
    let nodes = by_node.into_iter().map(|(node, jobs)| async move {
        let mut finished = 0;
        let watched = tokio::time::timeout(NODE_BUDGET, async {
            for row in jobs {
                let id = row.0;
                match watch_one(pool, fleet, row).await {
                    Ok(true) => finished += 1,
                    Ok(false) => {}
                    // One job's trouble must not leave the others unwatched.
                    Err(e) => tracing::warn!(task = id, error = %e, "compute watcher: job left for the next pass"),
                }
            }
        })
        .await;
        if watched.is_err() {
            tracing::warn!(node, "compute watcher: node's engine too slow; its other jobs wait for the next pass");
        }
        finished
    });
    let finished: usize = futures_util::future::join_all(nodes).await.into_iter().sum();
    Ok(finished + remove_leftovers(pool).await?)
}

/// Machines of ended tasks that are still there with nothing open on them:
/// a failed create's machine whose delete then failed too (or was
/// cancelled by an admin). Their task is over, so the pass above no longer
/// sees them; each gets the system's delete again, with its backoff, until
/// it goes — it still holds its volume and counts on its node's CPU and
/// memory.
async fn remove_leftovers(pool: &Pool) -> Result<usize, PlatformError> {
    let ended: Vec<i64> = sqlx::query_scalar(
        "SELECT c.id FROM compute_tasks c JOIN machines m ON m.id = c.machine_id
         WHERE c.state IN ('succeeded', 'failed', 'cancelled') AND m.workload = 'job' AND m.state NOT IN ('deleted', 'lost')
           AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.state IN ('pending', 'scheduled', 'running'))",
    )
    .fetch_all(pool)
    .await?;
    let mut queued = 0;
    for id in ended {
        let mut tx = transitions::begin(pool).await?;
        if transitions::compute::delete_job_machine(&mut tx, id, "its machine was left behind").await?.is_some() {
            queued += 1;
        }
        tx.commit().await?;
    }
    Ok(queued)
}

/// Records the job's end if it ended (or must be stopped) and queues its
/// machine's delete in the same commit; `true` when the delete is queued.
async fn watch_one(pool: &Pool, fleet: &Fleet, row: Watched) -> Result<bool, PlatformError> {
    let (id, machine_id, exit_code) = (row.0, row.1, row.8);
    let ended = match exit_code {
        Some(code) => {
            tracing::info!(
                task = id,
                machine = machine_id,
                "compute watcher: exit {code} recorded earlier; queueing its delete again"
            );
            None
        }
        None => match observe_end(pool, fleet, row).await? {
            Some(ended) => Some(ended),
            None => return Ok(false),
        },
    };
    let mut tx = transitions::begin(pool).await?;
    let why = match ended {
        Some((code, tail, why)) => {
            transitions::compute::exited(&mut tx, id, code, &tail, &why).await?;
            why
        }
        None => format!("exited with code {}", exit_code.unwrap_or(-1)),
    };
    // The system's delete, not the requester's: they may no longer see the
    // machine (moved to another group), and the GPUs must come back anyway.
    let queued = transitions::compute::delete_job_machine(&mut tx, id, &why).await?;
    tx.commit().await?;
    Ok(queued.is_some())
}

/// The job's exit code, the end of its output and why it ended — once its
/// container exited or vanished, or after stopping it (cancel, time
/// limit); `None` while it should keep running or its engine is away.
///
/// Why the watcher stops a job is in the task's row before the stop: a
/// cancel is recorded by the cancel itself, the time limit just before the
/// stop. A pass cut off after the stop (its node's budget ran out) thus
/// leaves the reason to the next pass, which sees only an exited
/// container — and must not take the stop's exit code (137, or 0) for the
/// job's own. Without such a record an exited container ended by itself,
/// however late the watcher looks: its own exit code stands.
async fn observe_end(pool: &Pool, fleet: &Fleet, row: Watched) -> Result<Option<(i64, String, String)>, PlatformError> {
    let (id, _, limit, started_at, cancel, message, container, node_id, _) = row;
    let Some(container) = container.as_deref() else { return Ok(None) };
    let exec = fleet.executor(pool, node_id).await?;
    let status = match exec.inspect_container(container).await {
        Ok(s) => s.status,
        Err(e) => {
            tracing::warn!(container, error = %e, "compute watcher: engine not answering");
            return Ok(None);
        }
    };
    let ended = matches!(status, ContainerStatus::Exited { .. } | ContainerStatus::Missing);
    let limit_recorded = message == transitions::compute::time_limit_message(limit, true);
    // The disk watcher's reason, recorded before it stopped the container
    // (`crate::disk`): the job ends failed with it, whatever the stop's code.
    let for_disk = !cancel && gantry_core::disk::is_stopped_text(&message);
    let over_time = !ended && started_at.is_some_and(|s| now() >= s + limit);
    let for_time_limit = !cancel && !for_disk && (limit_recorded || over_time);
    let why = match status {
        // A cancel wins, as in the outcome (`gantry_core::compute::outcome`),
        // even over an exit the watcher had not seen yet.
        _ if cancel => message,
        _ if for_disk => message,
        _ if for_time_limit => transitions::compute::time_limit_message(limit, false),
        ContainerStatus::Exited { code } => format!("exited with code {code}"),
        ContainerStatus::Missing => "its container vanished".to_string(),
        _ => return Ok(None),
    };
    if !ended {
        if for_time_limit && !limit_recorded {
            // Committed before the stop: see above.
            let mut tx = transitions::begin(pool).await?;
            transitions::compute::stopping_for_time_limit(&mut tx, id, limit).await?;
            tx.commit().await?;
        }
        if let Err(e) = exec.stop_container(container).await {
            tracing::warn!(container, error = %e, "compute watcher: could not stop the container");
            return Ok(None);
        }
    }
    let code = match exec.inspect_container(container).await.map(|s| s.status) {
        Ok(ContainerStatus::Exited { code }) => code,
        _ => -1,
    };
    let tail = exec.output_tail(container, TAIL_LINES).await.unwrap_or_default();
    // A time limit fails the task whatever the exit code the stop left.
    let code = if for_time_limit && code == 0 { 124 } else { code };
    // So does a disk stop (137: killed, as an engine reports it).
    let code = if for_disk && code == 0 { 137 } else { code };
    Ok(Some((code, tail, why)))
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
            // Never abort the pass: the jobs after this one are watched too.
            match transitions::task::cancel(pool, &user, task_id).await {
                Ok(()) | Err(PlatformError::Conflict(_)) => {}
                Err(e) => {
                    tracing::warn!(task = task_id, error = %e, "compute watcher: could not cancel the create of a cancelled job")
                }
            }
        }
    }
    Ok(())
}

/// The watcher and the matcher, each every `period` until the process
/// ends. Two loops: a watcher pass held up by a slow engine must not keep
/// queued tasks from being placed elsewhere.
pub async fn run_loops(pool: Pool, fleet: Fleet, admissions: Admissions, period: Duration) {
    let matcher_pool = pool.clone();
    let watcher = every(period, move || {
        let (p, f) = (pool.clone(), fleet.clone());
        async move {
            if let Some(Err(e)) =
                crate::contained::pass("compute watcher", async move { watch_once(&p, &f).await }).await
            {
                tracing::error!(error = %e, "compute watcher failed");
            }
        }
    });
    let matcher = every(period, move || {
        let (p, a) = (matcher_pool.clone(), admissions.clone());
        async move {
            if let Some(Err(e)) =
                crate::contained::pass("compute matcher", async move { super::evaluate_queue(&p, &a).await }).await
            {
                tracing::error!(error = %e, "compute matcher failed");
            }
        }
    });
    tokio::join!(watcher, matcher);
}

async fn every<F: std::future::Future<Output = ()>>(period: Duration, mut pass: impl FnMut() -> F) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        pass().await;
    }
}
