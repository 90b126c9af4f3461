//! The master: claims scheduled tasks, drives each one on its node's
//! executor step by step, and writes progress and outcome back. Tasks of
//! different machines run in parallel; one machine's tasks never overlap.

mod context;
mod steps;

use crate::{db::Pool, fleet::Fleet, now, PlatformError};
use gantry_core::task::{backoff_secs, TaskKind};
use std::{sync::Arc, time::Duration};
use tokio::sync::{Notify, Semaphore};

/// Tries for an operation whose engine is unreachable, before it fails.
pub const MAX_ATTEMPTS: i64 = 5;

#[derive(Debug, Clone)]
pub struct ClaimedTask {
    pub id: i64,
    pub kind: TaskKind,
    pub machine_id: i64,
    pub attempts: i64,
    pub keep_volume: bool,
}

#[derive(Clone)]
pub struct Dispatcher {
    pub pool: Pool,
    pub fleet: Fleet,
    pub wake: Arc<Notify>,
    pub parallel: usize,
}

impl Dispatcher {
    /// Runs until the process ends.
    pub async fn run(self) {
        let permits = Arc::new(Semaphore::new(self.parallel));
        loop {
            let free = permits.available_permits();
            let claimed = if free > 0 {
                claim(&self.pool, free as i64).await.unwrap_or_else(|e| {
                    tracing::error!(error = %e, "claiming tasks failed");
                    Vec::new()
                })
            } else {
                Vec::new()
            };
            if claimed.is_empty() {
                // Woken by new tasks or finished ones; the timeout covers
                // retry backoffs coming due.
                let _ = tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await;
                continue;
            }
            for task in claimed {
                let permit = permits.clone().acquire_owned().await.expect("semaphore never closes");
                let me = self.clone();
                tokio::spawn(async move {
                    me.execute(task).await;
                    drop(permit);
                    me.wake.notify_one();
                });
            }
        }
    }

    /// Runs one claimed task to its end (or back to `scheduled` for a retry).
    pub async fn execute(&self, task: ClaimedTask) {
        let outcome = steps::run(self, &task).await;
        if let Err(e) = self.finish(&task, outcome).await {
            tracing::error!(task = task.id, error = %e, "recording the task outcome failed");
        }
    }

    async fn finish(&self, task: &ClaimedTask, outcome: Result<String, steps::StepError>) -> Result<(), PlatformError> {
        let now = now();
        match outcome {
            Ok(message) => {
                sqlx::query("UPDATE tasks SET state = 'succeeded', progress = 100, message = ?, updated_at = ? WHERE id = ? AND state = 'running'")
                    .bind(&message)
                    .bind(now)
                    .bind(task.id)
                    .execute(&self.pool)
                    .await?;
                tracing::info!(task = task.id, kind = %task.kind, machine = task.machine_id, "{message}");
            }
            Err(steps::StepError::Retry(reason)) if task.attempts < MAX_ATTEMPTS => {
                let delay = backoff_secs(task.attempts as u32);
                let message = format!("{reason}; retry {} of {MAX_ATTEMPTS} in {delay} s", task.attempts + 1);
                sqlx::query("UPDATE tasks SET state = 'scheduled', not_before = ?, message = ?, updated_at = ? WHERE id = ? AND state = 'running'")
                    .bind(now + delay)
                    .bind(&message)
                    .bind(now)
                    .bind(task.id)
                    .execute(&self.pool)
                    .await?;
                tracing::warn!(task = task.id, "{message}");
            }
            Err(steps::StepError::Retry(reason) | steps::StepError::Fail(reason)) => {
                let message = if task.attempts >= MAX_ATTEMPTS {
                    format!("{reason} (gave up after {} attempts)", task.attempts)
                } else {
                    reason
                };
                steps::on_failure(self, task, &message).await?;
                sqlx::query("UPDATE tasks SET state = 'failed', message = ?, updated_at = ? WHERE id = ? AND state = 'running'")
                    .bind(&message)
                    .bind(now)
                    .bind(task.id)
                    .execute(&self.pool)
                    .await?;
                tracing::warn!(task = task.id, kind = %task.kind, "failed: {message}");
            }
        }
        Ok(())
    }
}

/// Moves up to `limit` due tasks from `scheduled` to `running`, at most one
/// per machine and none for a machine that already has one running.
pub async fn claim(pool: &Pool, limit: i64) -> Result<Vec<ClaimedTask>, PlatformError> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let now = now();
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
                sqlx::query("UPDATE tasks SET state = 'failed', message = ? WHERE id = ?").bind(format!("{e}")).bind(id).execute(&mut *tx).await?;
                continue;
            }
        };
        sqlx::query("UPDATE tasks SET state = 'running', attempts = attempts + 1, updated_at = ? WHERE id = ?")
            .bind(now)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        claimed.push(ClaimedTask { id, kind, machine_id, attempts: attempts + 1, keep_volume });
    }
    tx.commit().await?;
    Ok(claimed)
}

/// After a crash, tasks left `running` are resumed: every step is
/// idempotent, so running them again from the start is safe.
pub async fn resume_interrupted(pool: &Pool) -> Result<u64, PlatformError> {
    let done = sqlx::query(
        "UPDATE tasks SET state = 'scheduled', not_before = 0, message = 'resumed after a server restart', updated_at = ? WHERE state = 'running'",
    )
    .bind(now())
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
