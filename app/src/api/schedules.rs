//! Schedules and queued starts (issue 35, part 1): a machine's schedule,
//! Start with "start when GPUs are free", cancelling a waiting start, the
//! user's time zone and a group's longest run. Thin: every check is the
//! platform's (`gantry_platform::schedules`), which the JSON API calls too.

use crate::error::AppError;
use gantry_platform::schedules::{ScheduleChange, ScheduleView, StartOutcome};
use leptos::prelude::*;

/// A machine's schedule, its next action and its place in the start
/// queue; another group's machine is 404.
#[server(prefix = "/api", endpoint = "machine_schedule")]
pub async fn machine_schedule(machine_id: i64) -> Result<ScheduleView, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::schedules::get(&crate::state::pool()?, &user, machine_id).await?)
}

/// "8" → 8, "" → none; anything else is refused before the platform sees it.
fn hours(text: &str) -> Result<Option<i64>, AppError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<i64>()
        .map(Some)
        .map_err(|_| AppError::Invalid(format!("stop after N hours: '{text}' is not a whole number of hours")))
}

/// Sets a machine's schedule (owner or admin): empty fields clear.
#[server(prefix = "/api", endpoint = "set_machine_schedule")]
pub async fn set_machine_schedule(
    machine_id: i64,
    stop_at: String,
    start_at: String,
    stop_after_hours: String,
) -> Result<ScheduleView, AppError> {
    let user = crate::state::auth()?;
    let change = ScheduleChange {
        stop_at: Some(stop_at),
        start_at: Some(start_at),
        stop_after_hours: hours(&stop_after_hours)?,
    };
    Ok(gantry_platform::schedules::set(&crate::state::pool()?, &user, machine_id, change).await?)
}

/// Start; with `queue` ticked ("on"), a start with no room waits for GPUs
/// in the group's line instead of being refused. Says what happened.
#[server(prefix = "/api", endpoint = "start_machine_or_queue")]
pub async fn start_machine_or_queue(machine_id: i64, queue: Option<String>) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let queue = queue.is_some_and(|v| !v.is_empty() && v != "false");
    let outcome = gantry_platform::schedules::start(&crate::state::pool()?, &user, machine_id, queue).await?;
    Ok(match outcome {
        StartOutcome::Started { task_id } => {
            crate::state::wake_dispatcher();
            format!("Starting (task #{task_id}).")
        }
        StartOutcome::Queued { place, why } => format!("Waiting for GPUs: {} ({why}).", place.text),
    })
}

/// Takes a waiting start out of the line (owner or admin).
#[server(prefix = "/api", endpoint = "cancel_queued_start")]
pub async fn cancel_queued_start(machine_id: i64) -> Result<(), AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::schedules::cancel_queued_start(&crate::state::pool()?, &user, machine_id).await?)
}

/// The signed-in user's time zone (IANA; UTC until chosen).
#[server(prefix = "/api", endpoint = "my_time_zone")]
pub async fn my_time_zone() -> Result<String, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::schedules::time_zone(&crate::state::pool()?, user.id).await?)
}

/// Sets the signed-in user's time zone; a name the bundled rules do not
/// know is refused.
#[server(prefix = "/api", endpoint = "set_my_time_zone")]
pub async fn set_my_time_zone(time_zone: String) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::schedules::set_time_zone(&crate::state::pool()?, &user, &time_zone).await?)
}

/// A group's longest run without a stop (admins; 0 = no limit).
#[server(prefix = "/api", endpoint = "set_group_max_run")]
pub async fn set_group_max_run(group_id: i64, max_run_hours: String) -> Result<u32, AppError> {
    let user = crate::state::auth()?;
    let hours = max_run_hours
        .trim()
        .parse::<i64>()
        .map_err(|_| AppError::Invalid(format!("'{}' is not a whole number of hours", max_run_hours.trim())))?;
    Ok(gantry_platform::schedules::set_group_max_run(&crate::state::pool()?, &user, group_id, hours).await?)
}

/// Every group's longest run, for Admin → Groups: (group id, hours).
#[server(prefix = "/api", endpoint = "group_max_runs")]
pub async fn group_max_runs() -> Result<Vec<(i64, u32)>, AppError> {
    let user = crate::state::auth()?;
    if !user.is_admin() {
        return Err(AppError::Forbidden);
    }
    let pool = crate::state::pool()?;
    let mut out = Vec::new();
    for g in gantry_platform::accounts::list_groups(&pool).await? {
        out.push((g.id, gantry_platform::schedules::group_max_run(&pool, g.id).await?));
    }
    Ok(out)
}
