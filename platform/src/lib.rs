//! Gantry's IO services. Server functions and background loops call these;
//! the rules they apply live in `gantry-core`.

pub mod accounts;
pub mod audit;
pub mod catalogue;
pub mod cluster;
pub mod compute;
pub mod contained;
pub mod datasets;
pub mod db;
pub mod db_version;
pub mod disk;
pub mod dispatch;
pub mod error;
pub mod executor;
pub mod first_run;
pub mod fleet;
pub mod gpus;
pub mod images;
pub mod machines;
pub mod nodes;
pub mod notifications;
pub mod password;
pub mod policy;
pub mod policy_access;
pub mod policy_disk;
pub mod reclaim;
pub mod reconcile;
pub mod schedules;
pub mod snapshots;
pub mod ssh_keys;
pub mod sso;
pub mod telemetry;
pub mod throttle;
pub mod tokens;
pub mod transitions;
pub mod volume_pool;
pub mod workspace;

pub use error::PlatformError;

/// Current UTC time as unix seconds, the unit every table stores.
pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}
