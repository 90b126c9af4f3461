//! Claiming tasks under a lease, renewing it, fencing writes with it, and
//! resuming tasks whose runner went away (lease expired).

use super::{begin, Tx};
use crate::{audit, db::Pool, PlatformError};
use gantry_core::task::{TaskKind, TaskState};
use std::sync::Arc;

/// How long a claim holds without renewal, by default. The runner renews
/// every third of it, so only a process that stopped (or hung) loses its
/// tasks; the shorter it is, the sooner another process resumes them.
pub const LEASE_SECS: i64 = 30;

/// The right to execute one task, held by one claim of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub task_id: i64,
    pub owner: Arc<str>,
    /// Seconds each claim or renewal holds.
    pub secs: i64,
    /// The task's attempt number this claim made. The owner id alone does
    /// not fence: a runner stalled past its lease (a database stall longer
    /// than the lease) sees its own process requeue the task and claim it
    /// again under the same id; the stalled runner must then be refused.
    pub attempt: i64,
}

#[derive(Debug, Clone)]
pub struct ClaimedTask {
    pub id: i64,
    pub kind: TaskKind,
    pub machine_id: i64,
    pub attempts: i64,
    pub keep_volume: bool,
    pub lease: Lease,
    /// Taken just before the claim read the clock its lease expiry counts
    /// from: the runner counts how long it holds the task from here, so it
    /// is never later than the database's expiry.
    pub claimed_at: tokio::time::Instant,
}

/// Moves up to `limit` due tasks from `scheduled` to `running` under
/// `owner`'s lease: at most one per machine, none for a machine that already
/// has one running (whoever runs it).
///
/// The lease counts from the clock read once the write lock is ours, not
/// from before: waiting for it (up to the busy timeout, or the pool's
/// acquire timeout) would otherwise hand out a lease already run out, and
/// the next expiry pass would give the task to a second runner.
pub async fn claim(
    pool: &Pool,
    owner: &Arc<str>,
    limit: i64,
    lease_secs: i64,
) -> Result<Vec<ClaimedTask>, PlatformError> {
    let mut tx = begin(pool).await?;
    let claimed_at = tokio::time::Instant::now();
    let now = crate::now();
    let rows: Vec<(i64, String, i64, i64, bool)> = sqlx::query_as(
        "SELECT t.id, t.kind, t.machine_id, t.attempts, t.keep_volume FROM tasks t
         WHERE t.state = 'scheduled' AND t.not_before <= ? AND t.machine_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM tasks r WHERE r.machine_id = t.machine_id AND r.state = 'running')
           AND t.id = (SELECT MIN(s.id) FROM tasks s WHERE s.machine_id = t.machine_id AND s.state = 'scheduled')
         ORDER BY t.id LIMIT ?",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    let mut claimed = Vec::with_capacity(rows.len());
    for (id, kind, machine_id, attempts, keep_volume) in rows {
        let kind: TaskKind = match kind.parse() {
            Ok(k) => k,
            Err(e) => {
                super::task::set_state(&mut tx, id, TaskState::Scheduled, TaskState::Failed, &format!("{e}")).await?;
                continue;
            }
        };
        super::task::set_state(&mut tx, id, TaskState::Scheduled, TaskState::Running, "started").await?;
        sqlx::query("UPDATE tasks SET lease_owner = ?, lease_expires = ?, attempts = attempts + 1 WHERE id = ?")
            .bind(owner.as_ref())
            .bind(now + lease_secs)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        audit::record(
            &mut *tx,
            None,
            "task.claim",
            &format!("task #{id} ({kind}) claimed by {owner}, attempt {}", attempts + 1),
        )
        .await?;
        claimed.push(ClaimedTask {
            id,
            kind,
            machine_id,
            attempts: attempts + 1,
            keep_volume,
            lease: Lease { task_id: id, owner: owner.clone(), secs: lease_secs, attempt: attempts + 1 },
            claimed_at,
        });
    }
    tx.commit().await?;
    Ok(claimed)
}

/// Extends the lease; `false` when it is no longer ours.
pub async fn renew(pool: &Pool, lease: &Lease, now: i64) -> Result<bool, PlatformError> {
    let done = sqlx::query(
        "UPDATE tasks SET lease_expires = ? WHERE id = ? AND state = 'running' AND lease_owner = ? AND attempts = ?",
    )
    .bind(now + lease.secs)
    .bind(lease.task_id)
    .bind(lease.owner.as_ref())
    .bind(lease.attempt)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A write transaction in which `lease` is known to hold: every write a
/// runner makes goes through one, so a runner that lost its task changes
/// nothing.
pub async fn fenced(pool: &Pool, lease: &Lease) -> Result<Tx, PlatformError> {
    let mut tx = begin(pool).await?;
    if !holds(&mut tx, lease).await? {
        return Err(PlatformError::LeaseLost(format!("task #{} is no longer held by {}", lease.task_id, lease.owner)));
    }
    Ok(tx)
}

/// Whether `lease` still holds, and has not run out: asked before a
/// runner that is giving up touches the engine (a runner that lost its
/// task must not remove the container its successor made).
pub async fn held(pool: &Pool, lease: &Lease) -> Result<bool, PlatformError> {
    let mut conn = pool.acquire().await?;
    let unexpired: Option<i64> = sqlx::query_scalar("SELECT id FROM tasks WHERE id = ? AND lease_expires > ?")
        .bind(lease.task_id)
        .bind(crate::now())
        .fetch_optional(&mut *conn)
        .await?;
    Ok(unexpired.is_some() && holds(&mut conn, lease).await?)
}

async fn holds(conn: &mut sqlx::SqliteConnection, lease: &Lease) -> Result<bool, PlatformError> {
    let held: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM tasks WHERE id = ? AND state = 'running' AND lease_owner = ? AND attempts = ?",
    )
    .bind(lease.task_id)
    .bind(lease.owner.as_ref())
    .bind(lease.attempt)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(held.is_some())
}

/// Hands back, at once, every task `owner` holds: what a process that is
/// shutting down does after it stopped its work, so a restarted server (or
/// another one) resumes the tasks now rather than a lease period later.
/// Only for an owner that runs nothing any more: the next claimer repeats
/// the interrupted step, as after a crash (every step is idempotent).
pub async fn release_all(pool: &Pool, owner: &str) -> Result<u64, PlatformError> {
    let mut tx = begin(pool).await?;
    let held: Vec<i64> = sqlx::query_scalar("SELECT id FROM tasks WHERE state = 'running' AND lease_owner = ?")
        .bind(owner)
        .fetch_all(&mut *tx)
        .await?;
    for id in &held {
        super::task::set_state(
            &mut tx,
            *id,
            TaskState::Running,
            TaskState::Scheduled,
            &format!("resumed: {owner} shut down before finishing it"),
        )
        .await?;
        sqlx::query("UPDATE tasks SET not_before = 0 WHERE id = ?").bind(id).execute(&mut *tx).await?;
        audit::record(&mut *tx, None, "task.lease_released", &format!("task #{id}: {owner} shut down; requeued"))
            .await?;
    }
    tx.commit().await?;
    Ok(held.len() as u64)
}

/// Hands tasks whose runner stopped renewing back to the queue. Every step
/// is idempotent, so the next claimer runs them again from the start.
pub async fn expire(pool: &Pool, now: i64) -> Result<u64, PlatformError> {
    let mut tx = begin(pool).await?;
    let stale: Vec<(i64, Option<String>)> =
        sqlx::query_as("SELECT id, lease_owner FROM tasks WHERE state = 'running' AND lease_expires < ?")
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
    for (id, owner) in &stale {
        let owner = owner.as_deref().unwrap_or("nobody");
        super::task::set_state(
            &mut tx,
            *id,
            TaskState::Running,
            TaskState::Scheduled,
            &format!("resumed: {owner} stopped renewing its lease"),
        )
        .await?;
        sqlx::query("UPDATE tasks SET not_before = 0 WHERE id = ?").bind(id).execute(&mut *tx).await?;
        audit::record(&mut *tx, None, "task.lease_expired", &format!("task #{id}: lease of {owner} expired; requeued"))
            .await?;
    }
    tx.commit().await?;
    Ok(stale.len() as u64)
}
