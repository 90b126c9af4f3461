//! One pass of the schedule loop at a given instant: for every dev machine
//! with a schedule (or in a group with a longest run) the core says what
//! is due — a stop, a start, a max-run warning — and it is done through
//! the same stop and start as a person's; then the start queue is served.

use super::{edit, queue, settings, tell};
use crate::{db::Pool, transitions::begin, PlatformError};
use gantry_core::schedule::{self, Due, Policy};
use std::{sync::Arc, time::Duration};
use tokio::sync::Notify;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// Machines whose stop was queued (their schedule's or the group's).
    pub stopped: Vec<i64>,
    /// Machines whose scheduled start was admitted at once.
    pub started: Vec<i64>,
    /// Machines whose scheduled start found no room and waits in the line.
    pub queued: Vec<i64>,
    /// Machines warned of the group's longest run.
    pub warned: Vec<i64>,
    /// Machines whose waiting start began.
    pub started_from_queue: Vec<i64>,
}

impl PassReport {
    fn queued_work(&self) -> bool {
        !(self.stopped.is_empty() && self.started.is_empty() && self.started_from_queue.is_empty())
    }
}

/// A pass every `interval`, and the start queue served whenever GPUs are
/// returned ([`queue::wake`]); wakes the dispatcher when it queued work.
pub async fn run(pool: Pool, dispatch: Arc<Notify>, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let whole = tokio::select! {
            _ = tick.tick() => true,
            () = queue::woken() => false,
        };
        let p = pool.clone();
        let done = crate::contained::pass("schedules", async move {
            if whole {
                pass(&p, crate::now()).await
            } else {
                queue::serve(&p).await.map(|began| PassReport { started_from_queue: began, ..Default::default() })
            }
        })
        .await;
        match done {
            Some(Ok(r)) if r.queued_work() => dispatch.notify_one(),
            Some(Ok(_)) | None => {}
            Some(Err(e)) => tracing::error!(error = %e, "schedule pass failed"),
        }
    }
}

/// One pass at `now` (unix seconds).
pub async fn pass(pool: &Pool, now: i64) -> Result<PassReport, PlatformError> {
    let mut report = PassReport::default();
    let warn_secs = crate::reclaim::load_settings(pool).await?.reclaim.grace_secs;
    let candidates: Vec<(i64, bool)> = sqlx::query_as(
        "SELECT m.id, s.machine_id IS NOT NULL FROM machines m
           LEFT JOIN machine_schedules s ON s.machine_id = m.id
           LEFT JOIN group_run_limits l ON l.group_id = m.group_id
         WHERE m.workload = 'dev' AND m.state IN ('running', 'stopped', 'reclaimed')
           AND (s.machine_id IS NOT NULL OR (l.max_run_hours > 0 AND m.state IN ('running', 'stopped')))
         ORDER BY m.id",
    )
    .fetch_all(pool)
    .await?;
    for (machine_id, scheduled) in candidates {
        let mut conn = pool.acquire().await?;
        let Some(m) = edit::load(&mut conn, None, machine_id).await? else { continue };
        drop(conn);
        let tz_name = settings::time_zone(pool, m.owner_id).await?;
        let (tz, tz_name) = schedule::zone(&tz_name).unwrap_or((schedule::TimeZone::UTC, "UTC".into()));
        let policy = Policy { max_run_hours: settings::group_max_run(pool, m.group_id).await?, warn_secs };
        let due = schedule::due(&m.schedule, &tz, &tz_name, &policy, &m.standing, now);
        // A daily time that could not be acted on (the machine was busy)
        // is tried again at the next pass rather than skipped for a day.
        let mut handled = true;
        match due {
            Due::Nothing => {}
            Due::Stop { why } => match stop(pool, m.owner_id, machine_id, &why).await {
                Ok(()) => report.stopped.push(machine_id),
                Err(e) => {
                    tracing::warn!(machine = machine_id, error = %e, "scheduled stop not possible now");
                    handled = false;
                }
            },
            Due::Start { why } => match start(pool, m.owner_id, machine_id).await {
                Ok(queue::StartOutcome::Started { .. }) => report.started.push(machine_id),
                Ok(queue::StartOutcome::Queued { .. }) => report.queued.push(machine_id),
                Err(e) => {
                    tracing::warn!(machine = machine_id, error = %e, "scheduled start ({why}) not possible now");
                    handled = false;
                }
            },
            Due::Warn { until, why } => {
                warn(pool, machine_id, &m.name, now, until, &why).await?;
                report.warned.push(machine_id);
            }
        }
        if scheduled && handled {
            sqlx::query("UPDATE machine_schedules SET checked_until = ? WHERE machine_id = ? AND checked_until < ?")
                .bind(now)
                .bind(machine_id)
                .bind(now)
                .execute(pool)
                .await?;
        }
    }
    report.started_from_queue = queue::serve(pool).await?;
    Ok(report)
}

async fn owner(pool: &Pool, owner_id: i64) -> Result<crate::accounts::User, PlatformError> {
    crate::accounts::user_by_id(pool, owner_id).await?.ok_or_else(|| PlatformError::NotFound("owner".into()))
}

/// The stop is the owner's stop, said to be the schedule's.
async fn stop(pool: &Pool, owner_id: i64, machine_id: i64, why: &str) -> Result<(), PlatformError> {
    let in_flight: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE machine_id = ? AND kind = 'reclaim'
                          AND state IN ('pending', 'scheduled', 'running') AND json_extract(payload, '$.stop') = 1)",
    )
    .bind(machine_id)
    .fetch_one(pool)
    .await?;
    if in_flight {
        // Asked for already (by a person or an earlier pass): told once.
        return Ok(());
    }
    let who = owner(pool, owner_id).await?;
    crate::transitions::reclaim::stop_as(pool, &who, machine_id, &format!("stopped by {why}"), None).await?;
    tell::schedule_stopped(pool, machine_id, why).await;
    Ok(())
}

/// A scheduled start with no room waits in the line.
async fn start(pool: &Pool, owner_id: i64, machine_id: i64) -> Result<queue::StartOutcome, PlatformError> {
    let who = owner(pool, owner_id).await?;
    queue::start(pool, &who, machine_id, true).await
}

/// The group's max-run warning, audited, its owner told in the same commit.
async fn warn(pool: &Pool, machine_id: i64, name: &str, now: i64, until: i64, why: &str) -> Result<(), PlatformError> {
    let mut tx = begin(pool).await?;
    sqlx::query(
        "INSERT INTO machine_run_warnings (machine_id, warned_at, until) VALUES (?1, ?2, ?3)
         ON CONFLICT (machine_id) DO UPDATE SET warned_at = ?2, until = ?3",
    )
    .bind(machine_id)
    .bind(now)
    .bind(until)
    .execute(&mut *tx)
    .await?;
    let detail = format!("machine {name}: {why}");
    crate::audit::record(&mut *tx, None, "machine.max_run_warn", &detail).await?;
    tell::max_run_warned(&mut tx, machine_id, &detail).await?;
    tx.commit().await?;
    Ok(())
}
