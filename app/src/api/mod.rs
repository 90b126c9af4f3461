//! Server functions, one file per area. Each is thin: authorise, call a
//! platform service, map the result to a DTO.

pub mod admin;
pub mod auth;
pub mod catalogue;
pub mod compute;
pub mod dashboard;
pub mod dataset_quotas;
pub mod datasets;
pub mod disk;
pub mod fleet;
pub mod lists;
pub mod machines;
pub mod notifications;
pub mod reclaim;
pub mod schedules;
pub mod snapshots;
pub mod ssh_keys;
pub mod sso_admin;
pub mod telemetry;
pub mod terminals;
pub mod tokens;
pub mod volumes;
