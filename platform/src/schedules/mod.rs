//! Machines on their owner's schedule (issue 35, part 1): per machine a
//! daily stop, a daily start and a stop after N hours running, in the
//! owner's time zone; per group the longest run without a stop (a warning
//! first); and starts that wait for GPUs, first come first served in the
//! group. What is due is decided by `gantry_core::schedule` and
//! `gantry_core::start_queue`; stops and starts go through the one
//! transition path (`transitions::reclaim`). [`pass`] takes the time as an
//! argument so tests run it at any instant.

mod edit;
mod pass;
mod queue;
mod settings;
mod tell;

pub use edit::{get, set};
pub use pass::{pass, run, PassReport};
pub use queue::{cancel_queued_start, queue_place, serve, serve_after, start, wake, StartOutcome};
pub use settings::{group_max_run, set_group_max_run, set_time_zone, time_zone};

use serde::{Deserialize, Serialize};

/// A machine's schedule as its page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleView {
    pub machine_id: i64,
    pub machine_name: String,
    /// Whether the viewer may change it (its owner or an admin).
    pub can_edit: bool,
    /// HH:MM in `time_zone`.
    pub stop_at: Option<String>,
    pub start_at: Option<String>,
    pub stop_after_hours: Option<u32>,
    /// The owner's time zone (IANA), in which the daily times are read.
    pub time_zone: String,
    pub group_name: String,
    /// The group's longest run without a stop; 0: no limit.
    pub max_run_hours: u32,
    /// The next thing the schedule (or the group's limit) will do.
    pub next: Option<NextAction>,
    /// Its place in the group's line, while its start waits for GPUs.
    pub queued: Option<QueuePlace>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextAction {
    /// Unix seconds.
    pub at: i64,
    /// When, in the owner's time zone ("2026-01-15 19:00 CET").
    pub local: String,
    pub what: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePlace {
    /// 1 for the head of the line.
    pub place: usize,
    pub group_name: String,
    pub queued_at: i64,
    /// "2nd in line in group ml-team".
    pub text: String,
}

/// A change of a machine's schedule, as typed: an empty or missing time
/// clears it, and 0 (or none) hours clears the stop after N hours.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleChange {
    #[serde(default)]
    pub stop_at: Option<String>,
    #[serde(default)]
    pub start_at: Option<String>,
    #[serde(default)]
    pub stop_after_hours: Option<i64>,
}
