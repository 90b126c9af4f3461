//! The idle-reclaim and hot-GPU loop's settings on the command line; the
//! loop itself is `gantry_platform::reclaim::run` (its thresholds are the
//! admin console's Reclaim page).

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ReclaimArgs {
    /// Seconds between passes of the idle-reclaim and hot-GPU rebalancing loop.
    #[arg(long, env = "GANTRY_RECLAIM_INTERVAL_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub reclaim_interval_secs: u64,
}
