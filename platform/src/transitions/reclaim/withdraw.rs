//! When a queued reclaim is no longer wanted, and when one failed.
//!
//! A reclaim is queued as a `scheduled` task with a `creating` snapshot
//! while the machine keeps running. Until a runner claims it, withdrawing
//! the warning (busy again, exempted, extended, cancelled by an admin)
//! cancels it in the same commit. Once claimed it may be half-way (the
//! container committed or removed), so it is only stopped by its runner,
//! which asks [`call_off_if_withdrawn`] before each step that cannot be
//! undone. A failed reclaim pushes the deadline back ([`back_off`]) rather
//! than being queued again at the next pass.

use super::super::{lease::fenced, snapshot, task, Lease};
use crate::{audit, db::Pool, PlatformError};
use gantry_core::{
    reclaim::{format_left, retry_delay, MachineEventKind, ReclaimSettings},
    task::{MachineState, TaskKind, TaskState},
};
use sqlx::SqliteConnection;

/// The machine's reclaim that a runner has begun: running, or back in the
/// queue after an attempt (its container may already be gone).
pub(crate) async fn begun(conn: &mut SqliteConnection, machine_id: i64) -> Result<Option<i64>, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM tasks WHERE machine_id = ? AND kind = 'reclaim'
           AND (state = 'running' OR (state IN ('pending', 'scheduled') AND attempts > 0)) ORDER BY id LIMIT 1",
    )
    .bind(machine_id)
    .fetch_optional(&mut *conn)
    .await?)
}

/// Cancels the machine's reclaim that no runner has claimed yet (so
/// nothing was done on the node), failing its snapshot with it.
async fn cancel_queued(conn: &mut SqliteConnection, machine_id: i64, why: &str) -> Result<Option<i64>, PlatformError> {
    let cancelled = task::cancel_unclaimed(conn, machine_id, TaskKind::Reclaim, why).await?;
    for id in &cancelled {
        snapshot::task_ended(conn, *id, why).await?;
    }
    Ok(cancelled.last().copied())
}

/// Withdraws the machine's warning inside the caller's transaction: the
/// deadline and extensions are cleared, a reclaim queued but not started
/// is cancelled, and the reason is recorded. `false` when it was neither
/// warned nor queued.
pub(crate) async fn withdraw(
    conn: &mut SqliteConnection,
    machine_id: i64,
    reason: &str,
) -> Result<bool, PlatformError> {
    let cleared = sqlx::query("UPDATE machines SET reclaim_deadline = NULL, reclaim_extensions = 0, rev = rev + 1 WHERE id = ? AND reclaim_deadline IS NOT NULL")
        .bind(machine_id)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    let cancelled = cancel_queued(conn, machine_id, &format!("not reclaimed: {reason}")).await?;
    if cleared == 0 && cancelled.is_none() {
        return Ok(false);
    }
    let detail = match cancelled {
        Some(id) => format!("{reason}; the queued reclaim (task #{id}) was cancelled"),
        None => reason.to_string(),
    };
    snapshot::event(conn, machine_id, MachineEventKind::ReclaimCleared, &detail).await?;
    Ok(true)
}

/// Cancels the queued reclaim an extension makes unnecessary (the warning
/// stays, with its new deadline); its id.
pub(crate) async fn extended(
    conn: &mut SqliteConnection,
    machine_id: i64,
    who: &str,
) -> Result<Option<i64>, PlatformError> {
    cancel_queued(conn, machine_id, &format!("not reclaimed: {who} extended the deadline")).await
}

/// Cancels the queued reclaim of a machine just exempted (`why` says how),
/// recording it on the machine; its id. The warning itself is withdrawn by
/// the next pass, which sees the exemption (and says so); an exemption
/// lifted before then leaves the warning as it was.
pub(crate) async fn exempted(
    conn: &mut SqliteConnection,
    machine_id: i64,
    why: &str,
) -> Result<Option<i64>, PlatformError> {
    let cancelled = cancel_queued(conn, machine_id, &format!("not reclaimed: {why}")).await?;
    if let Some(id) = cancelled {
        snapshot::event(
            conn,
            machine_id,
            MachineEventKind::ReclaimCleared,
            &format!("{why}; the queued reclaim (task #{id}) was cancelled"),
        )
        .await?;
    }
    Ok(cancelled)
}

/// Asked by the reclaim's runner, under its lease, before it commits the
/// container and before it removes it: is the reclaim still wanted — the
/// machine running or stopped, still warned, with the deadline and
/// extensions it was queued with, and neither it nor its group exempt?
/// If not, the task ends here, `succeeded` with "not reclaimed" (nothing
/// went wrong, the machine is left as it was), its snapshot failed; `true`.
pub async fn call_off_if_withdrawn(pool: &Pool, lease: &Lease, machine_id: i64) -> Result<bool, PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    let queued = snapshot::payload(&mut tx, lease.task_id).await?;
    let row: Option<(String, Option<i64>, i64, bool)> = sqlx::query_as(
        "SELECT m.state, m.reclaim_deadline, m.reclaim_extensions, (m.reclaim_exempt OR g.reclaim_exempt)
         FROM machines m JOIN groups g ON g.id = m.group_id WHERE m.id = ?",
    )
    .bind(machine_id)
    .fetch_optional(&mut *tx)
    .await?;
    let row = row
        .map(|(state, at, used, exempt)| state.parse::<MachineState>().map(|s| (s, at, used, exempt)))
        .transpose()?;
    // Tasks queued before the payload named them carry no deadline: for
    // those only a withdrawn warning or an exemption is seen.
    let (at, used) =
        (queued.get("deadline").and_then(|v| v.as_i64()), queued.get("extensions").and_then(|v| v.as_i64()));
    let why = match row {
        None => "the machine is gone".to_string(),
        Some((state, ..)) if !matches!(state, MachineState::Running | MachineState::Stopped) => {
            format!("the machine is {state}")
        }
        Some((_, None, ..)) => "the warning was withdrawn (its GPUs were used again)".to_string(),
        Some((.., true)) => "the machine or its group was exempted from idle reclaim".to_string(),
        Some((_, Some(deadline), extensions, _))
            if at.is_some_and(|a| a != deadline) || used.is_some_and(|u| u != extensions) =>
        {
            "the deadline was extended".to_string()
        }
        Some(_) => return Ok(false),
    };
    let message = format!("not reclaimed: {why} after it was queued; the machine is left as it was");
    snapshot::task_ended(&mut tx, lease.task_id, &message).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Succeeded, &message).await?;
    // (machine_events' kinds are fixed by the schema: this one is shown as
    // "warning withdrawn", which is what it amounts to.)
    snapshot::event(&mut tx, machine_id, MachineEventKind::ReclaimCleared, &message).await?;
    audit::record(
        &mut *tx,
        None,
        "machine.reclaim_called_off",
        &format!("machine #{machine_id}, task #{}: {message}", lease.task_id),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// The machine's last reclaim failed under its current warning, and that
/// failure has not pushed the deadline back yet: the deadline moves to
/// `now` (the pass's clock) plus [`retry_delay`], which grows with each
/// reclaim in a row that failed under this warning; the failure is
/// recorded on the machine and the new deadline returned. The task's
/// payload notes it, so each failure counts once.
pub(super) async fn back_off(
    conn: &mut SqliteConnection,
    machine_id: i64,
    now: i64,
    settings: &ReclaimSettings,
) -> Result<Option<i64>, PlatformError> {
    // A warning ends with a `reclaim_cleared` event (withdrawn, called off,
    // cancelled) or a reclaim that did not fail; failures before either
    // belong to an earlier warning. Task and event times are both the wall
    // clock; the pass's `now` may not be.
    let (since, after): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT COALESCE(MAX(at_ms), 0) / 1000 FROM machine_events WHERE machine_id = ?1 AND kind = 'reclaim_cleared'),
                (SELECT COALESCE(MAX(id), 0) FROM tasks WHERE machine_id = ?1 AND kind = 'reclaim' AND state <> 'failed')",
    )
    .bind(machine_id)
    .fetch_one(&mut *conn)
    .await?;
    let failed: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, message FROM tasks WHERE machine_id = ? AND kind = 'reclaim' AND state = 'failed' AND created_at >= ? AND id > ? ORDER BY id DESC",
    )
    .bind(machine_id)
    .bind(since)
    .bind(after)
    .fetch_all(&mut *conn)
    .await?;
    let Some((task_id, failure)) = failed.first().cloned() else { return Ok(None) };
    let mut payload = snapshot::payload(conn, task_id).await?;
    if payload.get("retry_at").is_some() {
        return Ok(None);
    }
    let failures = failed.len() as u32;
    let delay = retry_delay(settings, failures);
    let until = now + delay;
    sqlx::query("UPDATE machines SET reclaim_deadline = ?, rev = rev + 1 WHERE id = ?")
        .bind(until)
        .bind(machine_id)
        .execute(&mut *conn)
        .await?;
    payload["retry_at"] = until.into();
    snapshot::set_payload(conn, task_id, &payload).await?;
    let detail = format!(
        "the reclaim (task #{task_id}) failed: {failure}; it is tried again in {} (at {} UTC) unless the machine is used or extended \
         ({failures} failed reclaim(s) in a row)",
        format_left(delay),
        gantry_core::time::format_utc(until)
    );
    // Shown as an idle warning: it is one, with a new deadline.
    snapshot::event(conn, machine_id, MachineEventKind::ReclaimWarning, &detail).await?;
    audit::record(&mut *conn, None, "reclaim.retry_later", &format!("machine #{machine_id}: {detail}")).await?;
    Ok(Some(until))
}
