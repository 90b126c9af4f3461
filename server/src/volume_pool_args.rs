//! The volume pool's settings on the command line: how many pre-formatted
//! data-volume images of which sizes the local node keeps ready, and the
//! disk they may take. The pool is `gantry_platform::volume_pool`.

use clap::Args;
use gantry_platform::volume_pool::PoolConfig;
use std::path::Path;

#[derive(Debug, Clone, Args)]
pub struct VolumePoolArgs {
    /// Pre-formatted data-volume images kept ready per size class on the
    /// local node, so a create only attaches one (0 to 256; 0: off).
    #[arg(long, env = "GANTRY_VOLUME_POOL_SIZE", default_value_t = 4, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=256))]
    pub volume_pool_size: usize,
    /// The size classes in GB, comma-separated: the volume sizes machines
    /// are created with (the create form's default is 10). A create of
    /// another size formats its own image.
    #[arg(long, env = "GANTRY_VOLUME_POOL_SIZES_GB", default_value = "10", value_parser = parse_sizes)]
    pub volume_pool_sizes_gb: SizeClasses,
    /// Disk all pool images together may take, in GB of allocated blocks
    /// (a fresh 10 GB image takes about 70 MB), 0 to 100000; 0: off.
    #[arg(long, env = "GANTRY_VOLUME_POOL_DISK_BUDGET_GB", default_value_t = 2.0, value_parser = parse_budget)]
    pub volume_pool_disk_budget_gb: f64,
}

impl VolumePoolArgs {
    pub fn config(&self, volume_dir: &Path) -> PoolConfig {
        PoolConfig {
            volume_dir: volume_dir.to_path_buf(),
            classes: self.volume_pool_sizes_gb.0.clone(),
            per_class: self.volume_pool_size,
            budget_bytes: (self.volume_pool_disk_budget_gb * 1e9) as u64,
        }
    }
}

/// The size classes, ascending: one flag value ("10,20"), not a repeated flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeClasses(pub Vec<i64>);

fn parse_sizes(s: &str) -> Result<SizeClasses, String> {
    gantry_core::volume_pool::parse_classes(s).map(SizeClasses)
}

fn parse_budget(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(gb) if (0.0..=100_000.0).contains(&gb) => Ok(gb),
        _ => Err(format!("{s:?} is not a number of GB from 0 to 100000")),
    }
}

#[cfg(test)]
mod tests {
    use super::VolumePoolArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        pool: VolumePoolArgs,
    }

    fn parse(extra: &[&str]) -> Result<VolumePoolArgs, clap::Error> {
        Cli::try_parse_from(["gantry"].iter().chain(extra).copied()).map(|c| c.pool)
    }

    #[test]
    fn defaults_bounds_and_off() {
        let d = parse(&[]).unwrap();
        let cfg = d.config(std::path::Path::new("/v"));
        assert_eq!((cfg.per_class, cfg.classes.clone(), cfg.budget_bytes), (4, vec![10], 2_000_000_000));
        assert!(cfg.enabled());
        let sizes = parse(&["--volume-pool-sizes-gb", "20,10"]).unwrap();
        assert_eq!(sizes.volume_pool_sizes_gb.0, vec![10, 20]);
        for off in [["--volume-pool-size", "0"], ["--volume-pool-disk-budget-gb", "0"], ["--volume-pool-sizes-gb", ""]]
        {
            assert!(!parse(&off).unwrap().config(std::path::Path::new("/v")).enabled(), "{off:?}");
        }
        for bad in [
            ["--volume-pool-size", "257"],
            ["--volume-pool-size", "-1"],
            ["--volume-pool-disk-budget-gb", "-1"],
            ["--volume-pool-disk-budget-gb", "lots"],
            ["--volume-pool-sizes-gb", "0"],
            ["--volume-pool-sizes-gb", "10,x"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }
}
