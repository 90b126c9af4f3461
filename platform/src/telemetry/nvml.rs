//! Readings of real GPUs through NVML, on the node this process runs on.

use gantry_core::telemetry::SimReading;
use nvml_wrapper::{bitmasks::device::ThrottleReasons, enum_wrappers::device::TemperatureSensor, enums::device::UsedGpuMemory, Nvml};
use std::sync::OnceLock;

/// NVML, loaded once; None where the driver is absent (the reason is logged
/// once, and GPUs marked real are then not sampled).
fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceLock<Option<Nvml>> = OnceLock::new();
    NVML.get_or_init(|| match Nvml::init() {
        Ok(n) => Some(n),
        Err(e) => {
            tracing::info!(error = %e, "NVML unavailable: only simulated GPUs are sampled");
            None
        }
    })
    .as_ref()
}

/// A real GPU's reading and its processes as `[{"pid":..,"used_mb":..}]`.
pub struct NvmlReading {
    pub reading: SimReading,
    pub mem_total_mb: i64,
    pub processes: String,
}

/// Reads the GPU with `uuid`, or None when NVML is absent or does not know
/// it (a GPU of another node).
pub fn read(uuid: &str) -> Option<NvmlReading> {
    let dev = nvml()?.device_by_uuid(uuid).ok()?;
    let mem = dev.memory_info().ok()?;
    let util = dev.utilization_rates().map(|u| u.gpu).unwrap_or(0);
    let temp = dev.temperature(TemperatureSensor::Gpu).unwrap_or(0);
    let power_mw = dev.power_usage().unwrap_or(0);
    let hot = ThrottleReasons::HW_SLOWDOWN | ThrottleReasons::SW_THERMAL_SLOWDOWN | ThrottleReasons::HW_THERMAL_SLOWDOWN;
    let throttled = dev.current_throttle_reasons().map(|r| r.intersects(hot)).unwrap_or(false);
    let processes: Vec<String> = dev
        .running_compute_processes()
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let used = match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => (b / (1024 * 1024)) as i64,
                UsedGpuMemory::Unavailable => -1,
            };
            format!("{{\"pid\":{},\"used_mb\":{used}}}", p.pid)
        })
        .collect();
    Some(NvmlReading {
        reading: SimReading {
            util_pct: f64::from(util.min(100)),
            mem_used_mb: (mem.used / (1024 * 1024)) as i64,
            temp_c: f64::from(temp),
            // Whole watts: what a chart shows, and one or two bytes stored.
            power_w: (f64::from(power_mw) / 1000.0).round(),
            throttled,
        },
        mem_total_mb: (mem.total / (1024 * 1024)) as i64,
        processes: format!("[{}]", processes.join(",")),
    })
}
