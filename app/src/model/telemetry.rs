//! Chart and overview data: defined in `gantry_core::telemetry::view`
//! (the server builds them), re-exported here with the other DTOs.

pub use gantry_core::telemetry::view::{ChartData, ChartEvent, ChartPoint, GpuSeries, GroupUsage, HeatCell, Overview};
