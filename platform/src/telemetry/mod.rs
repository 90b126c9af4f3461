//! GPU telemetry: samples from NVML or the simulated source, their storage
//! with 1-minute and 1-hour rollups, pruning, and the queries behind the
//! charts, the cluster overview and `/metrics`.
//!
//! Times are unix milliseconds throughout this module.

mod nvml;
pub mod overview;
pub mod query;
pub mod rollup;
pub mod sampler;
pub mod service;
pub mod store;

pub use sampler::sample_once;
pub use service::{config, TelemetryConfig};
pub use store::{gpu_window, insert_samples};

/// One reading of one GPU, attributed to the node and to the machine that
/// held the GPU at that moment (None when free).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSample {
    pub gpu_id: i64,
    pub at_ms: i64,
    pub node_id: i64,
    pub machine_id: Option<i64>,
    pub util_pct: f64,
    pub mem_used_mb: i64,
    pub mem_total_mb: i64,
    pub temp_c: f64,
    pub power_w: f64,
    pub throttled: bool,
}

/// Current time in unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
