//! The background services of `gantry serve`: the local worker node (GPUs,
//! executor, heartbeat), the admission worker, the dispatcher and the
//! reconciler.

use crate::config::NodeArgs;
use gantry_platform::{
    cluster::{self, NodeRegistration},
    db::Pool,
    dispatch::{self, Dispatcher},
    executor::{DockerExecutor, Executor, SimulatedExecutor},
    fleet::Fleet,
    gpus::{self, GpuSource, SimulatedGpus},
    images,
    machines::Admissions,
    reconcile, PlatformError,
};
use std::{path::Path, sync::Arc, time::Duration};
use tokio::sync::Notify;

pub struct Services {
    pub admissions: Admissions,
    pub dispatch: Arc<Notify>,
    pub fleet: Fleet,
    pub node_id: i64,
}

pub async fn start(pool: &Pool, data_dir: &Path, args: &NodeArgs) -> Result<Services, PlatformError> {
    let sim = SimulatedGpus { count: args.sim_gpus, model: args.sim_gpu_model.clone(), memory_mb: 81_920 };
    let (source, found) = gpus::discover(&args.node_name, &sim);
    match &source {
        GpuSource::Nvml { driver } => tracing::info!(count = found.len(), driver, "GPUs found through NVML"),
        GpuSource::Simulated { reason } => {
            tracing::warn!(count = found.len(), model = %sim.model, "{reason}: this node reports SIMULATED GPUs")
        }
    }
    let executor = choose_executor(args, data_dir).await;
    let node_id = cluster::register_node(
        pool,
        NodeRegistration {
            name: &args.node_name,
            region_code: "local",
            docker_endpoint: &args.docker_endpoint,
            executor: executor.kind(),
            cpu_count: std::thread::available_parallelism().map(|n| n.get() as i64).unwrap_or(1),
            memory_mb: total_memory_mb(),
            gpus: &found,
        },
    )
    .await?;
    let fleet = Fleet::new(data_dir.join("volumes"));
    fleet.insert(node_id, executor.clone());
    images::ensure_default_image(pool, "devbox", &args.default_image, "Gantry demo dev machine (busybox)").await?;

    let resumed = dispatch::resume_interrupted(pool).await?;
    if resumed > 0 {
        tracing::warn!(resumed, "resuming tasks interrupted by the last shutdown");
    }
    let wake = Arc::new(Notify::new());
    let admissions = Admissions::start(pool.clone(), wake.clone());
    let dispatcher = Dispatcher { pool: pool.clone(), fleet: fleet.clone(), wake: wake.clone(), parallel: args.dispatch_parallel.max(1) };
    tokio::spawn(dispatcher.run());
    tokio::spawn(reconcile::run(pool.clone(), fleet.clone(), Duration::from_secs(15)));
    tokio::spawn(heartbeat(pool.clone(), node_id, executor));
    Ok(Services { admissions, dispatch: wake, fleet, node_id })
}

/// MemTotal from /proc/meminfo (0 where that file does not exist).
fn total_memory_mb() -> i64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<i64>().ok()
        })
        .map(|kib| kib / 1024)
        .unwrap_or(0)
}

/// `auto` uses Docker when the engine answers, else the simulated executor
/// (labelled as such everywhere).
async fn choose_executor(args: &NodeArgs, data_dir: &Path) -> Executor {
    let simulated = || Executor::from(SimulatedExecutor::new());
    if args.executor == "simulated" {
        tracing::warn!("executor: SIMULATED (no containers are started)");
        return simulated();
    }
    let docker = match DockerExecutor::connect_with_volume_dir(&args.docker_endpoint, data_dir.join("volumes")) {
        Ok(d) => Executor::from(d),
        Err(e) if args.executor == "auto" => {
            tracing::warn!(error = %e, "executor: SIMULATED, the Docker endpoint is unusable");
            return simulated();
        }
        Err(e) => {
            tracing::error!(error = %e, "executor: Docker endpoint unusable; tasks will fail until fixed");
            return simulated();
        }
    };
    match docker.ping().await {
        Ok(info) => {
            tracing::info!(version = %info.version, api = %info.api_version, nvidia = info.has_nvidia_runtime, "executor: Docker Engine");
            docker
        }
        Err(e) if args.executor == "auto" => {
            tracing::warn!(error = %e, "executor: SIMULATED, no Docker Engine answers");
            simulated()
        }
        Err(e) => {
            // Explicitly docker: keep it; tasks retry until the engine is back.
            tracing::error!(error = %e, "executor: Docker Engine not answering yet");
            docker
        }
    }
}

/// Marks the node alive while its engine answers; a node whose engine is
/// gone stops getting new machines once its heartbeat goes stale.
async fn heartbeat(pool: Pool, node_id: i64, executor: Executor) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        match executor.ping().await {
            Ok(_) => {
                if let Err(e) = cluster::heartbeat(&pool, node_id).await {
                    tracing::error!(error = %e, "heartbeat not recorded");
                }
            }
            Err(e) => tracing::warn!(error = %e, "engine not answering; heartbeat withheld"),
        }
    }
}
