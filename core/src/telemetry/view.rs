//! What the charts and the cluster overview show, as it travels from the
//! server to the browser.

use serde::{Deserialize, Serialize};

/// One point of a GPU's series: the mean over the point's span, and the
/// highest utilisation within it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartPoint {
    pub at_ms: i64,
    pub util: f64,
    pub util_max: f64,
    pub mem_mb: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSeries {
    pub gpu_id: i64,
    pub label: String,
    pub mem_total_mb: i64,
    pub points: Vec<ChartPoint>,
}

/// Something that happened to the machine, marked on its chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartEvent {
    pub at_ms: i64,
    pub kind: crate::reclaim::MachineEventKind,
    pub detail: String,
}

/// A chart's data: per-GPU series over `[from_ms, to_ms]`, read from
/// `resolution` ("raw", "1m" or "1h"), with the thresholds to draw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartData {
    pub range: String,
    pub resolution: super::Resolution,
    pub from_ms: i64,
    pub to_ms: i64,
    /// How far apart neighbouring points are when nothing is missing: a
    /// longer gap (no samples: a lost node, a reclaimed machine, GPUs held
    /// by another machine meanwhile) is drawn as a break, not a slope.
    pub step_ms: i64,
    pub reclaim_pct: f64,
    pub hot_pct: f64,
    pub series: Vec<GpuSeries>,
    pub events: Vec<ChartEvent>,
    /// Some GPU reads from the simulated source: said on the chart.
    pub simulated: bool,
}

/// One GPU in the cluster overview's heatmap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeatCell {
    pub gpu_id: i64,
    pub node_id: i64,
    pub node: String,
    pub idx: i64,
    pub model: String,
    pub simulated: bool,
    /// None: never sampled.
    pub util: Option<f64>,
    pub temp_c: Option<f64>,
    /// From the same reading as `util` (one row, one statement: `/metrics`
    /// never pairs one sample's utilisation with another's memory).
    pub mem_used_mb: Option<i64>,
    pub mem_total_mb: Option<i64>,
    pub power_w: Option<f64>,
    pub at_ms: Option<i64>,
    pub machine_id: Option<i64>,
    pub machine: Option<String>,
    pub owner: Option<String>,
    pub group: Option<String>,
}

/// A group's GPU-hours over a period: held (a GPU allocated to one of its
/// machines) and used (held × utilisation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupUsage {
    pub group: String,
    pub held_gpu_hours: f64,
    pub used_gpu_hours: f64,
}

impl GroupUsage {
    /// Used as a share of held, in percent (0 when nothing was held).
    pub fn efficiency_pct(&self) -> f64 {
        if self.held_gpu_hours > 0.0 {
            100.0 * self.used_gpu_hours / self.held_gpu_hours
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    pub cells: Vec<HeatCell>,
    pub period: String,
    pub usage: Vec<GroupUsage>,
}
