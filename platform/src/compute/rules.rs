//! The group's rules a compute task's machine can never get past — GPUs
//! per machine, allowed models, the whole quota, CPU and memory per
//! machine — told apart from what only has to wait (free capacity, quota
//! in use). Only the head of a group's queue is decided, so a task that can
//! never be admitted must fail rather than wait: everything behind it
//! would wait for ever too.

use crate::{
    accounts::{self, User},
    db::Pool,
    machines::{check_limits, load_policy, CreateMachine},
    transitions, PlatformError,
};
use gantry_core::alloc::{check_ceilings, AllocationRequest};
use sqlx::SqliteConnection;

/// What a task asks of its job machine.
pub(super) struct Ask {
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
}

/// Why the requester's group (the one admission would charge) can never
/// admit the task's machine, with the numbers; `None` when it may, some day.
/// The same checks as admission, so the two cannot disagree.
pub(super) async fn never_admitted(conn: &mut SqliteConnection, requester: &User, ask: &Ask) -> Result<Option<String>, PlatformError> {
    let policy = load_policy(conn, requester.group_id).await?;
    let request = AllocationRequest { gpu_count: ask.gpus, model: ask.gpu_model.clone() };
    if let Err(refusal) = check_ceilings(&policy, &request) {
        return Ok(Some(refusal.to_string()));
    }
    let mut machine = CreateMachine::new(requester.clone(), "job", ask.gpus, 1);
    machine.cpu_millis = Some(ask.cpu_millis);
    machine.memory_mb = Some(ask.memory_mb);
    Ok(check_limits(conn, &machine, &policy).await?.err())
}

/// Fails a pending task for good; `false` when it is no longer pending
/// (cancelled meanwhile), which is not an error.
pub(super) async fn fail(pool: &Pool, id: i64, why: &str) -> Result<bool, PlatformError> {
    let mut tx = transitions::begin(pool).await?;
    let failed = transitions::compute::never_admitted(&mut tx, id, &format!("can never start: {why}")).await?;
    tx.commit().await?;
    Ok(failed)
}

/// Checks a task now, at submit (before it can queue behind anything).
pub(super) async fn fail_if_never_admitted(pool: &Pool, requester: &User, id: i64, ask: &Ask) -> Result<(), PlatformError> {
    let why = never_admitted(&mut *pool.acquire().await?, requester, ask).await?;
    if let Some(why) = why {
        fail(pool, id, &why).await?;
    }
    Ok(())
}

/// Fails every head of a group's queue that can never be admitted — the
/// rules changed after it was submitted, or it was queued before this
/// check existed — until each head may be admitted some day, so the tasks
/// behind a failed head are decided in the same pass.
pub(super) async fn fail_impossible_heads(pool: &Pool) -> Result<(), PlatformError> {
    loop {
        let heads: Vec<(i64, i64, u32, Option<String>, i64, i64)> = sqlx::query_as(
            "SELECT c.id, c.requester_id, c.gpu_count, c.gpu_model, c.cpu_millis, c.memory_mb FROM compute_tasks c
             WHERE c.state = 'pending' AND c.id = (SELECT MIN(o.id) FROM compute_tasks o WHERE o.group_id = c.group_id AND o.state = 'pending')",
        )
        .fetch_all(pool)
        .await?;
        let mut failed = false;
        for (id, requester_id, gpus, gpu_model, cpu_millis, memory_mb) in heads {
            let Some(requester) = accounts::user_by_id(pool, requester_id).await? else { continue };
            let ask = Ask { gpus, gpu_model, cpu_millis, memory_mb };
            let why = never_admitted(&mut *pool.acquire().await?, &requester, &ask).await?;
            if let Some(why) = why {
                failed |= fail(pool, id, &why).await?;
            }
        }
        // Each round failed at least one pending task, so this ends.
        if !failed {
            return Ok(());
        }
    }
}

/// Cancels the pending tasks of disabled accounts (of `requester` only,
/// when given); the write lock is taken only when there are some.
pub(super) async fn cancel_disabled(pool: &Pool, requester: Option<i64>) -> Result<(), PlatformError> {
    let any: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM compute_tasks c JOIN users u ON u.id = c.requester_id WHERE c.state = 'pending' AND u.disabled = 1 AND (?1 IS NULL OR u.id = ?1))",
    )
    .bind(requester)
    .fetch_one(pool)
    .await?;
    if any {
        let mut tx = transitions::begin(pool).await?;
        transitions::compute::cancel_pending_of_disabled(&mut tx, requester).await?;
        tx.commit().await?;
    }
    Ok(())
}
