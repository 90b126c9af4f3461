//! Readings of real GPUs through NVML, on the node this process runs on.

use gantry_core::telemetry::SimReading;
use nvml_wrapper::{
    bitmasks::device::ThrottleReasons, enum_wrappers::device::TemperatureSensor, enums::device::UsedGpuMemory, Nvml,
};
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

/// Reads the GPU with `uuid`, or None when NVML is absent, does not know
/// it (a GPU of another node), or cannot read what reclaim and rebalancing
/// decide on (see [`reading_from`]).
pub fn read(uuid: &str) -> Option<NvmlReading> {
    let dev = nvml()?.device_by_uuid(uuid).ok()?;
    // nvml-wrapper asks for the v2 memory call, which drivers before R510
    // lack: then no GPU is ever sampled, so say so (once) rather than
    // leave every chart empty without a word.
    let mem = match dev.memory_info() {
        Ok(mem) => mem,
        Err(e) => {
            static TOLD: std::sync::Once = std::sync::Once::new();
            TOLD.call_once(|| {
                tracing::warn!(gpu = uuid, error = %e, "NVML could not read GPU memory (the driver may predate R510): real GPUs are not sampled");
            });
            return None;
        }
    };
    let util = dev.utilization_rates().map(|u| u.gpu);
    let temp = dev.temperature(TemperatureSensor::Gpu);
    if let (Err(e), _) | (_, Err(e)) = (&util, &temp) {
        tracing::debug!(gpu = uuid, error = %e, "NVML could not read utilisation or temperature: no sample");
    }
    let power_mw = dev.power_usage().unwrap_or(0);
    let hot =
        ThrottleReasons::HW_SLOWDOWN | ThrottleReasons::SW_THERMAL_SLOWDOWN | ThrottleReasons::HW_THERMAL_SLOWDOWN;
    let throttled = dev.current_throttle_reasons().map(|r| r.intersects(hot)).unwrap_or(false);
    let reading = reading_from(util.ok(), temp.ok(), power_mw, throttled, mem.used)?;
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
        reading,
        mem_total_mb: (mem.total / (1024 * 1024)) as i64,
        processes: format!("[{}]", processes.join(",")),
    })
}

/// A sample from what NVML answered. Utilisation or temperature it could
/// not read (a MIG-enabled GPU has no utilisation counter; a driver hiccup)
/// gives no sample at all: a stored 0 % would read as idle and get a busy
/// machine reclaimed, and 0 °C would make its GPU the coolest for
/// rebalancing. A missing sample counts as a gap, which decides nothing.
fn reading_from(
    util: Option<u32>,
    temp_c: Option<u32>,
    power_mw: u32,
    throttled: bool,
    mem_used_bytes: u64,
) -> Option<SimReading> {
    Some(SimReading {
        util_pct: f64::from(util?.min(100)),
        mem_used_mb: (mem_used_bytes / (1024 * 1024)) as i64,
        temp_c: f64::from(temp_c?),
        // Whole watts: what a chart shows, and one or two bytes stored.
        power_w: (f64::from(power_mw) / 1000.0).round(),
        throttled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_utilisation_or_temperature_is_no_sample_not_zero() {
        assert!(reading_from(None, Some(60), 250_000, false, 1 << 30).is_none(), "never 0 % (idle)");
        assert!(reading_from(Some(90), None, 250_000, false, 1 << 30).is_none(), "never 0 °C (coolest)");
        let r = reading_from(Some(140), Some(71), 249_600, true, 3 << 30).unwrap();
        assert_eq!((r.util_pct, r.temp_c, r.power_w, r.mem_used_mb, r.throttled), (100.0, 71.0, 250.0, 3072, true));
    }
}
