//! The schedule loop's settings on the command line; the loop itself is
//! `gantry_platform::schedules::run` (daily stops and starts, stop after N
//! hours, the groups' longest run, and serving the start queue). Between
//! passes the start queue is also served whenever a stop returns GPUs.

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ScheduleArgs {
    /// Seconds between passes of the schedule loop: how late a scheduled
    /// stop or start may fire, and how soon a waiting start notices room
    /// that a deletion or a quota change made (1 to 3600).
    #[arg(long, env = "GANTRY_SCHEDULE_INTERVAL_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub schedule_interval_secs: u64,
}
