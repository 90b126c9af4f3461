//! Reading and changing one machine's schedule. Input is checked in full
//! before anything is written: a bad time, a negative number of hours or
//! another group's machine changes nothing.

use super::{queue, settings, NextAction, ScheduleChange, ScheduleView};
use crate::{accounts::User, audit, db::Pool, machines::visibility, transitions::begin, PlatformError};
use gantry_core::{
    schedule::{self, DailyTime, Policy, Schedule, Standing},
    task::{MachineState, Workload},
};
use sqlx::SqliteConnection;

/// One machine as the schedule reads it.
pub(super) struct Loaded {
    pub name: String,
    pub owner_id: i64,
    pub group_id: i64,
    pub group_name: String,
    pub workload: Workload,
    pub state: MachineState,
    pub schedule: Schedule,
    pub standing: Standing,
}

/// Machine `machine_id` with its schedule and standing; `None` when it is
/// not there or the viewer (if any) may not see it.
pub(super) async fn load(
    conn: &mut SqliteConnection,
    viewer: Option<&User>,
    machine_id: i64,
) -> Result<Option<Loaded>, PlatformError> {
    let (cond, bind) = match viewer {
        Some(v) => visibility(v, "m.group_id"),
        None => ("1 = 1 OR ? IS NULL".to_string(), 0),
    };
    type Row = (String, i64, i64, String, String, String, Option<String>, Option<String>, Option<i64>, Option<i64>);
    let row: Option<Row> = sqlx::query_as(&format!(
        "SELECT m.name, m.owner_id, m.group_id, g.name, m.workload, m.state, s.stop_at, s.start_at, s.stop_after_hours,
                s.checked_until
         FROM machines m JOIN groups g ON g.id = m.group_id LEFT JOIN machine_schedules s ON s.machine_id = m.id
         WHERE m.id = ? AND ({cond})"
    ))
    .bind(machine_id)
    .bind(bind)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((name, owner_id, group_id, group_name, workload, state, stop_at, start_at, hours, checked)) = row else {
        return Ok(None);
    };
    let state: MachineState = state.parse()?;
    let warning: Option<(i64, i64)> =
        sqlx::query_as("SELECT warned_at, until FROM machine_run_warnings WHERE machine_id = ?")
            .bind(machine_id)
            .fetch_optional(&mut *conn)
            .await?;
    let running_since = crate::transitions::reclaim::last_started(conn, machine_id).await?;
    let schedule = Schedule {
        stop_at: stop_at.and_then(|t| t.parse().ok()),
        start_at: start_at.and_then(|t| t.parse().ok()),
        stop_after_hours: hours.map(|h| h.clamp(0, 8760) as u32),
    };
    let standing = Standing {
        running: matches!(state, MachineState::Running | MachineState::Stopped),
        shut_down: state == MachineState::Reclaimed,
        running_since,
        checked_until: checked.unwrap_or(0),
        warning,
    };
    Ok(Some(Loaded { name, owner_id, group_id, group_name, workload: workload.parse()?, state, schedule, standing }))
}

/// A machine's schedule, the next thing it will do and its place in the
/// start queue; another group's machine is "not found".
pub async fn get(pool: &Pool, who: &User, machine_id: i64) -> Result<ScheduleView, PlatformError> {
    let mut conn = pool.acquire().await?;
    let m = load(&mut conn, Some(who), machine_id).await?.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    drop(conn);
    let tz_name = settings::time_zone(pool, m.owner_id).await?;
    let (tz, tz_name) = schedule::zone(&tz_name).unwrap_or((jiff_utc(), "UTC".into()));
    let policy = Policy {
        max_run_hours: settings::group_max_run(pool, m.group_id).await?,
        warn_secs: crate::reclaim::load_settings(pool).await?.reclaim.grace_secs,
    };
    let next = schedule::next_action(&m.schedule, &tz, &policy, &m.standing, crate::now())
        .map(|(at, what)| NextAction { at, local: schedule::local_time(at, &tz), what });
    Ok(ScheduleView {
        machine_id,
        machine_name: m.name,
        can_edit: who.acts_for(m.owner_id),
        stop_at: m.schedule.stop_at.map(|t| t.to_string()),
        start_at: m.schedule.start_at.map(|t| t.to_string()),
        stop_after_hours: m.schedule.stop_after_hours,
        time_zone: tz_name,
        group_name: m.group_name,
        max_run_hours: policy.max_run_hours,
        next,
        queued: queue::queue_place(pool, machine_id).await?,
    })
}

fn jiff_utc() -> gantry_core::schedule::TimeZone {
    gantry_core::schedule::TimeZone::UTC
}

fn daily(what: &str, text: &Option<String>) -> Result<Option<DailyTime>, PlatformError> {
    match text.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) => t.parse().map(Some).map_err(|e: String| PlatformError::BadRequest(format!("{what}: {e}"))),
    }
}

/// Sets a machine's schedule (its owner or an admin), audited as
/// `machine.schedule`; an all-empty change clears it. Daily times count
/// from now: a time already past today first fires tomorrow.
pub async fn set(
    pool: &Pool,
    who: &User,
    machine_id: i64,
    change: ScheduleChange,
) -> Result<ScheduleView, PlatformError> {
    let stop_at = daily("daily stop time", &change.stop_at)?;
    let start_at = daily("daily start time", &change.start_at)?;
    let hours = match change.stop_after_hours {
        None | Some(0) => None,
        Some(h) => schedule::parse_hours(&h.to_string())
            .map_err(|e| PlatformError::BadRequest(format!("stop after N hours: {e}")))?,
    };
    let mut tx = begin(pool).await?;
    let m = load(&mut tx, Some(who), machine_id).await?.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    if !who.acts_for(m.owner_id) {
        return Err(PlatformError::Conflict(format!(
            "only machine {}'s owner, or an admin, can change its schedule",
            m.name
        )));
    }
    if m.workload == Workload::Job {
        return Err(PlatformError::Conflict(format!(
            "machine {} runs a compute task: it ends with its task and has no schedule",
            m.name
        )));
    }
    if m.state == MachineState::Deleted {
        return Err(PlatformError::Conflict(format!("machine {} is deleted", m.name)));
    }
    let now = crate::now();
    let detail = if stop_at.is_none() && start_at.is_none() && hours.is_none() {
        sqlx::query("DELETE FROM machine_schedules WHERE machine_id = ?").bind(machine_id).execute(&mut *tx).await?;
        format!("machine {}: schedule cleared", m.name)
    } else {
        sqlx::query(
            "INSERT INTO machine_schedules (machine_id, stop_at, start_at, stop_after_hours, checked_until, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT (machine_id) DO UPDATE SET stop_at = ?2, start_at = ?3, stop_after_hours = ?4,
                                                    checked_until = ?5, updated_at = ?5",
        )
        .bind(machine_id)
        .bind(stop_at.map(|t| t.to_string()))
        .bind(start_at.map(|t| t.to_string()))
        .bind(hours.map(i64::from))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let tz: Option<String> = sqlx::query_scalar("SELECT time_zone FROM user_time_zones WHERE user_id = ?")
            .bind(m.owner_id)
            .fetch_optional(&mut *tx)
            .await?;
        let mut parts = Vec::new();
        if let Some(t) = stop_at {
            parts.push(format!("daily stop at {t}"));
        }
        if let Some(t) = start_at {
            parts.push(format!("daily start at {t}"));
        }
        if let Some(h) = hours {
            parts.push(format!("stop after {h} h running"));
        }
        format!("machine {}: {} ({})", m.name, parts.join(", "), tz.unwrap_or_else(|| "UTC".into()))
    };
    audit::record(&mut *tx, Some(who.id), "machine.schedule", &detail).await?;
    tx.commit().await?;
    get(pool, who, machine_id).await
}
