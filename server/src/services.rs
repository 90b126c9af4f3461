//! The background services of `gantry serve`: the local worker node (GPUs,
//! executor, heartbeat), the admission worker, the dispatcher and the
//! reconciler.

use crate::config::NodeArgs;
use gantry_platform::{
    cluster::{self, NodeRegistration},
    compute,
    db::Pool,
    dispatch::Dispatcher,
    executor::{loopdev, DockerExecutor, Executor, SimulatedExecutor},
    first_run,
    fleet::Fleet,
    gpus::{self, GpuSource, SimulatedGpus},
    images,
    machines::Admissions,
    nodes, reconcile, PlatformError,
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
    let volume_dir = data_dir.join("volumes");
    let partials = loopdev::remove_partials(&volume_dir, Duration::from_secs(600));
    if partials > 0 {
        tracing::warn!(partials, "removed volume images left half-formatted by a crash");
    }
    let executor = choose_executor(args, &volume_dir).await;
    let simulated_endpoint = format!("simulated://{}", args.node_name);
    let (endpoint, volume_dir) = match executor {
        Executor::Docker(_) => (args.docker_endpoint.as_str(), volume_dir.to_string_lossy().into_owned()),
        Executor::Simulated(_) => (simulated_endpoint.as_str(), String::new()),
    };
    let new_cluster = first_run::is_new_cluster(pool).await?;
    let node_id = cluster::register_node(
        pool,
        NodeRegistration {
            name: &args.node_name,
            region_code: "local",
            docker_endpoint: endpoint,
            volume_dir: &volume_dir,
            executor: executor.kind(),
            cpu_count: std::thread::available_parallelism().map(|n| n.get() as i64).unwrap_or(1),
            memory_mb: total_memory_mb(),
            gpus: &found,
        },
    )
    .await?;
    cluster::set_node_arch(pool, node_id, cluster::host_arch()).await?;
    if new_cluster {
        if let Some(quota) = first_run::grant_first_node_gpus(pool, &args.node_name, found.len() as i64).await? {
            tracing::info!(quota, node = %args.node_name, "first start: the default group's GPU quota is set to the GPUs found on this node (change it on the admin Groups page)");
        }
    }
    let fleet = Fleet::new();
    fleet.insert(node_id, executor);
    images::ensure_default_image(pool, "devbox", &args.default_image, "Gantry demo dev machine (busybox)").await?;

    // Tasks another process (or this one before a crash) left running are
    // resumed by whichever dispatcher sees their lease expire — never
    // while their runner still renews it.
    let wake = Arc::new(Notify::new());
    let admissions = Admissions::start(pool.clone(), wake.clone());
    let mut dispatcher = Dispatcher::new(pool.clone(), fleet.clone(), wake.clone(), args.dispatch_parallel);
    dispatcher.lease_secs = args.lease_secs.max(3);
    tracing::info!(owner = %dispatcher.owner, "dispatcher started");
    tokio::spawn(dispatcher.run());
    tokio::spawn(reconcile::run(pool.clone(), fleet.clone(), Duration::from_secs(15)));
    tokio::spawn(nodes::monitor(pool.clone(), fleet.clone(), Duration::from_secs(10)));
    tokio::spawn(compute::run_loops(pool.clone(), fleet.clone(), admissions.clone(), Duration::from_secs(2)));
    crate::metrics::start(pool, &args.telemetry);
    let every = Duration::from_secs(args.reclaim.reclaim_interval_secs);
    tokio::spawn(gantry_platform::reclaim::run(pool.clone(), wake.clone(), every));
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
async fn choose_executor(args: &NodeArgs, volume_dir: &Path) -> Executor {
    let simulated = || Executor::from(SimulatedExecutor::new());
    if args.executor == "simulated" {
        tracing::warn!("executor: SIMULATED (no containers are started)");
        return simulated();
    }
    let docker = match DockerExecutor::connect_with_volume_dir(&args.docker_endpoint, volume_dir) {
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
