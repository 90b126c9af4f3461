//! The disk watcher's and the node disk floor's settings on the command
//! line; the watcher is `gantry_platform::disk::run`, the floor is read by
//! admissions (`gantry_platform::disk::nodes`). The per-machine and
//! snapshot limits are each group's (Admin → Groups).

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct DiskArgs {
    /// Seconds between the disk watcher's passes (each machine's writable
    /// layer against its group's limit), 5 to 3600.
    #[arg(long, env = "GANTRY_DISK_WATCH_INTERVAL_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..=3600))]
    pub disk_watch_interval_secs: u64,
    /// A node whose free disk is below this many GB takes no new machine
    /// (0 to 100000; 0: no floor). A node whose free disk nothing can
    /// measure (a remote engine) is not refused.
    #[arg(long, env = "GANTRY_NODE_DISK_FLOOR_GB", default_value_t = gantry_platform::disk::nodes::DEFAULT_FLOOR_GB, value_parser = clap::value_parser!(i64).range(0..=100_000))]
    pub node_disk_floor_gb: i64,
}

#[cfg(test)]
mod tests {
    use super::DiskArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        disk: DiskArgs,
    }

    fn parse(extra: &[&str]) -> Result<DiskArgs, clap::Error> {
        Cli::try_parse_from(["gantry"].iter().chain(extra).copied()).map(|c| c.disk)
    }

    #[test]
    fn defaults_and_bounds() {
        let d = parse(&[]).unwrap();
        assert_eq!((d.disk_watch_interval_secs, d.node_disk_floor_gb), (60, 10));
        for ok in
            [["--node-disk-floor-gb", "0"], ["--node-disk-floor-gb", "100000"], ["--disk-watch-interval-secs", "5"]]
        {
            assert!(parse(&ok).is_ok(), "{ok:?}");
        }
        for bad in [
            ["--node-disk-floor-gb", "-1"],
            ["--node-disk-floor-gb", "100001"],
            ["--disk-watch-interval-secs", "4"],
            ["--disk-watch-interval-secs", "3601"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }
}
