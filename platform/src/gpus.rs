//! Finding a node's GPUs: through NVML when the NVIDIA driver is present,
//! otherwise a configured number of simulated GPUs, always labelled so.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiscoveredGpu {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub memory_mb: i64,
    pub simulated: bool,
}

/// Where the GPU list came from, for logs and the UI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum GpuSource {
    Nvml { driver: String },
    Simulated { reason: String },
}

#[derive(Debug, Clone)]
pub struct SimulatedGpus {
    pub count: u32,
    pub model: String,
    pub memory_mb: i64,
}

/// Real GPUs if NVML answers with at least one device; else simulated ones.
/// A device NVML lists but cannot read (fallen off the bus, no permission
/// on its `/dev/nvidiaN`) is left out, with a warning: the node's other
/// GPUs are still real ones (one such card used to turn the whole node
/// into simulated GPUs, dropping every real GPU's row).
pub fn discover(node_name: &str, sim: &SimulatedGpus) -> (GpuSource, Vec<DiscoveredGpu>) {
    match nvml_gpus() {
        Ok((driver, count, gpus)) if count > 0 => {
            if gpus.is_empty() {
                tracing::warn!(listed = count, "NVML lists GPUs but none could be read: this node has no usable GPU");
            }
            (GpuSource::Nvml { driver }, gpus)
        }
        Ok(_) => (GpuSource::Simulated { reason: "NVML found no GPUs".into() }, simulated(node_name, sim)),
        Err(reason) => (GpuSource::Simulated { reason }, simulated(node_name, sim)),
    }
}

/// Simulated GPUs with stable UUIDs, so a restart finds the same ones.
pub fn simulated(node_name: &str, sim: &SimulatedGpus) -> Vec<DiscoveredGpu> {
    (0..sim.count)
        .map(|i| DiscoveredGpu {
            index: i,
            uuid: format!("GPU-sim-{node_name}-{i}"),
            model: sim.model.clone(),
            memory_mb: sim.memory_mb,
            simulated: true,
        })
        .collect()
}

/// The devices `0..count` as `read` finds them, leaving out (and naming in
/// the log) one it cannot read.
fn readable(count: u32, read: impl Fn(u32) -> Result<DiscoveredGpu, String>) -> Vec<DiscoveredGpu> {
    (0..count)
        .filter_map(|i| match read(i) {
            Ok(gpu) => Some(gpu),
            Err(why) => {
                tracing::warn!(device = i, %why, "an NVIDIA GPU could not be read; it is left out until it can");
                None
            }
        })
        .collect()
}

/// The driver's version, how many devices NVML lists, and those it can read.
fn nvml_gpus() -> Result<(String, u32, Vec<DiscoveredGpu>), String> {
    use nvml_wrapper::Nvml;
    // Loads libnvidia-ml.so at run time; absent on machines without the driver.
    let nvml = Nvml::init().map_err(|e| format!("NVML unavailable ({e})"))?;
    let driver = nvml.sys_driver_version().unwrap_or_else(|_| "unknown".into());
    let count = nvml.device_count().map_err(|e| format!("NVML device count failed ({e})"))?;
    let gpus = readable(count, |i| {
        let dev = nvml.device_by_index(i).map_err(|e| format!("NVML device {i} failed ({e})"))?;
        Ok(DiscoveredGpu {
            index: dev.index().unwrap_or(i),
            uuid: dev.uuid().map_err(|e| format!("NVML uuid of device {i} failed ({e})"))?,
            model: dev.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
            memory_mb: dev.memory_info().map(|m| (m.total / (1024 * 1024)) as i64).unwrap_or(0),
            simulated: false,
        })
    });
    Ok((driver, count, gpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_that_cannot_be_read_is_left_out_and_the_others_stay_real() {
        let gpu = |index: u32| DiscoveredGpu {
            index,
            uuid: format!("GPU-real-{index}"),
            model: "H200".into(),
            memory_mb: 143_771,
            simulated: false,
        };
        let found = readable(3, |i| if i == 1 { Err("GPU is lost".into()) } else { Ok(gpu(i)) });
        assert_eq!(found, vec![gpu(0), gpu(2)]);
    }

    #[test]
    fn simulated_gpus_are_labelled_and_stable() {
        let sim = SimulatedGpus { count: 3, model: "SIM-A100".into(), memory_mb: 81920 };
        let a = simulated("node-a", &sim);
        assert_eq!(a.len(), 3);
        assert!(a.iter().all(|g| g.simulated && g.model == "SIM-A100"));
        assert_eq!(a[2].uuid, "GPU-sim-node-a-2");
        assert_eq!(a, simulated("node-a", &sim));
    }

    #[test]
    fn without_a_driver_discovery_falls_back_to_simulated() {
        // This machine has no NVIDIA driver; on one that has, NVML wins.
        let sim = SimulatedGpus { count: 2, model: "SIM".into(), memory_mb: 1 };
        let (source, gpus) = discover("n", &sim);
        match source {
            GpuSource::Simulated { reason } => {
                assert!(!reason.is_empty());
                assert_eq!(gpus.len(), 2);
            }
            GpuSource::Nvml { .. } => assert!(gpus.iter().all(|g| !g.simulated)),
        }
    }
}
