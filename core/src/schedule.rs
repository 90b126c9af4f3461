//! A dev machine's schedule: stop at a daily time, start at a daily time
//! (both in its owner's time zone), stop after N hours running, and its
//! group's longest run (a warning first, then a stop). This is the one
//! place that decides what is due at an instant; the platform's pass
//! applies it with the clock it is given, so tests run it at any instant.

mod daily;
#[cfg(test)]
mod tests;

pub use daily::{last_occurrence, local_time, next_occurrence, zone, DailyTime};

pub use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

/// The owner's choices for one machine (all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    pub stop_at: Option<DailyTime>,
    pub start_at: Option<DailyTime>,
    /// Stop once it has run this long since its last start.
    pub stop_after_hours: Option<u32>,
}

/// The group's policy, set by admins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    /// The longest a machine may run without being stopped; 0 = no limit.
    pub max_run_hours: u32,
    /// How long before that stop its owner is warned (the idle reclaim's
    /// warning window).
    pub warn_secs: i64,
}

/// Where a machine stands, as the pass read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    /// Holds a container and GPUs (running or stopped): a stop applies.
    pub running: bool,
    /// Put away by a stop: a start applies.
    pub shut_down: bool,
    /// When it last started (unix s).
    pub running_since: i64,
    /// Daily times up to this instant were already handled (the previous
    /// pass, or when the schedule was set): each occurrence fires once.
    pub checked_until: i64,
    /// The group's max-run warning of this run: (when it was given, when
    /// the stop is due). One given before the last start is of another run.
    pub warning: Option<(i64, i64)>,
}

/// What is due at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    Nothing,
    Stop {
        why: String,
    },
    Start {
        why: String,
    },
    /// The group's max-run warning: the stop follows at `until`.
    Warn {
        until: i64,
        why: String,
    },
}

/// What is due at `now` for a machine with `schedule`, owned by someone in
/// `tz` (named `tz_name`), in a group with `policy`.
pub fn due(schedule: &Schedule, tz: &TimeZone, tz_name: &str, policy: &Policy, s: &Standing, now: i64) -> Due {
    if s.running {
        if let Some(at) = schedule.stop_at {
            if last_occurrence(at, tz, s.checked_until, now).is_some() {
                return Due::Stop { why: format!("its daily stop at {at} ({tz_name})") };
            }
        }
        if let Some(hours) = schedule.stop_after_hours.filter(|h| *h > 0) {
            if now >= s.running_since + i64::from(hours) * 3600 {
                return Due::Stop { why: format!("its schedule stops it after {hours} h running") };
            }
        }
        if policy.max_run_hours > 0 {
            let limit = i64::from(policy.max_run_hours);
            let deadline = s.running_since + limit * 3600;
            match s.warning.filter(|(at, _)| *at >= s.running_since) {
                Some((_, until)) if now >= until => {
                    return Due::Stop { why: format!("its group lets a machine run at most {limit} h without a stop") }
                }
                Some(_) => {}
                None if now >= deadline - policy.warn_secs => {
                    // Never less notice than the window, even when the
                    // policy came in after the machine had run past it.
                    let until = deadline.max(now + policy.warn_secs);
                    return Due::Warn {
                        until,
                        why: format!(
                            "its group lets a machine run at most {limit} h without a stop: it will be stopped (filesystem kept, \
                             GPUs returned) in {}",
                            crate::reclaim::format_left(until - now)
                        ),
                    };
                }
                None => {}
            }
        }
    } else if s.shut_down {
        if let Some(at) = schedule.start_at {
            if last_occurrence(at, tz, s.checked_until, now).is_some() {
                return Due::Start { why: format!("its daily start at {at} ({tz_name})") };
            }
        }
    }
    Due::Nothing
}

/// The next action the schedule will take after `now`, for the machine's
/// page: (when, what). The group's max run counts when it comes first.
pub fn next_action(
    schedule: &Schedule,
    tz: &TimeZone,
    policy: &Policy,
    s: &Standing,
    now: i64,
) -> Option<(i64, String)> {
    let mut next: Vec<(i64, String)> = Vec::new();
    if s.running {
        if let Some(at) = schedule.stop_at {
            next.push((next_occurrence(at, tz, now), "daily stop".into()));
        }
        if let Some(hours) = schedule.stop_after_hours.filter(|h| *h > 0) {
            next.push((s.running_since + i64::from(hours) * 3600, format!("stop after {hours} h running")));
        }
        if policy.max_run_hours > 0 {
            let warned = s.warning.filter(|(at, _)| *at >= s.running_since).map(|(_, until)| until);
            let at = warned.unwrap_or(s.running_since + i64::from(policy.max_run_hours) * 3600);
            next.push((at, format!("the group's {} h limit", policy.max_run_hours)));
        }
    } else if s.shut_down {
        if let Some(at) = schedule.start_at {
            next.push((next_occurrence(at, tz, now), "daily start".into()));
        }
    }
    next.into_iter().min_by_key(|(at, _)| *at).map(|(at, what)| (at.max(now), what))
}

/// "stop after N hours": whole hours, 1 to 8760 (a year), or none.
pub fn parse_hours(text: &str) -> Result<Option<u32>, String> {
    let text = text.trim();
    if text.is_empty() || text == "0" {
        return Ok(None);
    }
    match text.parse::<i64>() {
        Ok(h) if (1..=8760).contains(&h) => Ok(Some(h as u32)),
        Ok(h) if h < 0 => Err(format!("hours must not be negative (got {h})")),
        Ok(h) => Err(format!("at most 8760 hours (a year), got {h}")),
        Err(_) => Err(format!("'{text}' is not a whole number of hours")),
    }
}
