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
use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};
use tokio::sync::Notify;

pub struct Services {
    pub admissions: Admissions,
    pub dispatch: Arc<Notify>,
    pub fleet: Fleet,
    pub node_id: i64,
    pub shutdown: Shutdown,
}

/// Ends the dispatcher's work when the server stops (see
/// `Dispatcher::run_until`): operations in flight get the grace period,
/// then whatever is unfinished goes back to the queue for the next start.
pub struct Shutdown {
    stop: tokio::sync::oneshot::Sender<()>,
    dispatcher: tokio::task::JoinHandle<()>,
}

impl Shutdown {
    pub async fn run(self) {
        let _ = self.stop.send(());
        let _ = self.dispatcher.await;
    }
}

/// Registers the local node and starts the background services.
pub async fn start(pool: &Pool, data_dir: &Path, args: &NodeArgs) -> Result<Services, PlatformError> {
    Ok(prepare(pool, data_dir, args).await?.start(pool, args))
}

/// The start-up work that can fail, before any background service runs:
/// the local node's registration (GPUs, executor), the first node's quota
/// and the default image. [`Prepared::start`] then cannot fail, so a start
/// that is refused never leaves a dispatcher behind that claimed tasks.
pub async fn prepare(pool: &Pool, data_dir: &Path, args: &NodeArgs) -> Result<Prepared, PlatformError> {
    let new_cluster = first_run::is_new_cluster(pool).await?;
    let local = register_local_node(pool, data_dir, args).await?;
    if new_cluster {
        if let Some(quota) = first_run::grant_first_node_gpus(pool, &args.node_name, local.gpu_count as i64).await? {
            tracing::info!(quota, node = %args.node_name, "first start: the default group's GPU quota is set to the GPUs found on this node (change it on the admin Groups page)");
        }
    }
    images::ensure_default_image(pool, "devbox", &args.default_image, "Gantry demo dev machine (busybox)").await?;
    let raw_keep_secs = i64::try_from(args.telemetry.telemetry_raw_hours * 3600).unwrap_or(i64::MAX);
    for why in gantry_platform::reclaim::note_raw_retention(pool, raw_keep_secs).await? {
        tracing::warn!("reclaim settings: {why} (Admin → Reclaim)");
    }
    Ok(Prepared { local })
}

/// The local node, registered; nothing runs yet.
pub struct Prepared {
    local: LocalNode,
}

impl Prepared {
    /// Starts the admission worker, the dispatcher and the loops.
    pub fn start(self, pool: &Pool, args: &NodeArgs) -> Services {
        let node_id = self.local.id;
        let fleet = Fleet::new();
        if let Some(executor) = self.local.executor {
            fleet.insert(node_id, executor);
        }
        // Tasks another process (or this one before a crash) left running are
        // resumed by whichever dispatcher sees their lease expire — never
        // while their runner still renews it.
        let wake = Arc::new(Notify::new());
        let admissions = Admissions::start(pool.clone(), wake.clone());
        let mut dispatcher = Dispatcher::new(pool.clone(), fleet.clone(), wake.clone(), args.dispatch_parallel);
        dispatcher.lease_secs = args.lease_secs.max(3);
        tracing::info!(owner = %dispatcher.owner, "dispatcher started");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let grace = Duration::from_secs(args.shutdown_grace_secs);
        let dispatcher = tokio::spawn(dispatcher.run_until(
            async move {
                let _ = stopped.await;
            },
            grace,
        ));
        tokio::spawn(reconcile::run(pool.clone(), fleet.clone(), Duration::from_secs(15)));
        tokio::spawn(nodes::monitor(pool.clone(), fleet.clone(), Duration::from_secs(10)));
        tokio::spawn(compute::run_loops(pool.clone(), fleet.clone(), admissions.clone(), Duration::from_secs(2)));
        crate::routes::metrics::start(pool, &args.telemetry);
        let every = Duration::from_secs(args.reclaim.reclaim_interval_secs);
        tokio::spawn(gantry_platform::reclaim::run(pool.clone(), wake.clone(), every));
        let every = Duration::from_secs(args.schedule.schedule_interval_secs);
        tokio::spawn(gantry_platform::schedules::run(pool.clone(), wake.clone(), every));
        gantry_platform::disk::nodes::set_floor_gb(args.disk.node_disk_floor_gb);
        let every = Duration::from_secs(args.disk.disk_watch_interval_secs);
        tokio::spawn(gantry_platform::disk::run(pool.clone(), fleet.clone(), every));
        crate::notify_loop::start(pool, &args.notify);
        if let Some(dir) = &self.local.volume_dir {
            // Pre-formatted volume images for this node's creates; claims by
            // other servers sharing the node are seen on the 30 s pass.
            let pool_cfg = args.volume_pool.config(dir);
            tokio::spawn(gantry_platform::volume_pool::run(pool_cfg, Duration::from_secs(30)));
        }
        Services { admissions, dispatch: wake, fleet, node_id, shutdown: Shutdown { stop, dispatcher } }
    }
}

/// The local worker node as start-up registered it.
pub struct LocalNode {
    pub id: i64,
    /// `None` when no executor can be made for the row's endpoint (a
    /// malformed address, TLS without certificates): the fleet then tries
    /// again from the row on each use and reports why it cannot.
    pub executor: Option<Executor>,
    pub gpu_count: usize,
    /// Its block-volume directory when it runs a local Docker engine (where
    /// the volume pool lives); `None` for a simulated or remote one.
    pub volume_dir: Option<PathBuf>,
}

/// Start-up registration of the local node: finds its GPUs, picks its
/// executor and writes the node row.
pub async fn register_local_node(pool: &Pool, data_dir: &Path, args: &NodeArgs) -> Result<LocalNode, PlatformError> {
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
    let before = registered(pool, &args.node_name).await?;
    let engine = probe_engine(args, &volume_dir).await;
    let choice = decide_executor(before.as_ref().map(|b| b.executor.as_str()), &args.executor, engine.answered);
    log_choice(choice, &args.node_name, &engine);
    // A remote engine gets plain volumes (no mkfs), so no pool.
    let local = engine.docker.as_ref().is_some_and(DockerExecutor::makes_block_volumes);
    let pool_dir = (choice.is_docker() && local).then(|| volume_dir.clone());
    let (executor, endpoint, volume_dir) = if choice.is_docker() {
        (engine.docker.map(Executor::from), args.docker_endpoint.clone(), volume_dir.to_string_lossy().into_owned())
    } else {
        (Some(SimulatedExecutor::new().into()), format!("simulated://{}", args.node_name), String::new())
    };
    let node_id = cluster::register_node_as(
        pool,
        NodeRegistration {
            name: &args.node_name,
            region_code: "local",
            docker_endpoint: &endpoint,
            volume_dir: &volume_dir,
            executor: if choice.is_docker() { "docker" } else { "simulated" },
            cpu_count: std::thread::available_parallelism().map(|n| n.get() as i64).unwrap_or(1),
            memory_mb: total_memory_mb(),
            gpus: &found,
        },
        Some(cluster::host_arch()),
        None,
    )
    .await?;
    if choice.is_docker() && !engine.answered {
        // Registration marks the node alive; a silent engine has not earned
        // that, so nothing is scheduled here until the monitor hears it.
        cluster::set_heartbeat(pool, node_id, before.map_or(0, |b| b.last_heartbeat)).await?;
    }
    Ok(LocalNode { id: node_id, executor, gpu_count: found.len(), volume_dir: pool_dir })
}

/// The local node's row as the previous run left it.
struct Registered {
    executor: String,
    last_heartbeat: i64,
}

async fn registered(pool: &Pool, name: &str) -> Result<Option<Registered>, PlatformError> {
    let row = gantry_platform::cluster::node_executor_and_heartbeat(pool, name).await?;
    Ok(row.map(|(executor, last_heartbeat)| Registered { executor, last_heartbeat }))
}

/// Which executor the local node starts with, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorChoice {
    /// `--executor simulated`.
    SimulatedRequested,
    /// The Docker Engine answers.
    DockerAnswers,
    /// The engine is silent, but the node is registered as Docker: its
    /// machines' containers live there, and an empty simulated engine
    /// would have the reconciler fail them and free their GPUs.
    DockerRegistered,
    /// The engine is silent on a new or simulated node, and Docker was
    /// asked for explicitly.
    DockerRequested,
    /// `auto` on a node that has never run Docker, and no engine answers:
    /// a first start on a host without Docker.
    SimulatedNoEngine,
}

impl ExecutorChoice {
    pub fn is_docker(self) -> bool {
        matches!(self, Self::DockerAnswers | Self::DockerRegistered | Self::DockerRequested)
    }
}

/// `registered`: the node row's executor, if the node exists; `requested`:
/// `--executor` (auto, docker or simulated); `answered`: whether the
/// engine answered a ping (an endpoint no client can be made for does not).
pub fn decide_executor(registered: Option<&str>, requested: &str, answered: bool) -> ExecutorChoice {
    match (requested, answered, registered) {
        ("simulated", _, _) => ExecutorChoice::SimulatedRequested,
        (_, true, _) => ExecutorChoice::DockerAnswers,
        (_, false, Some("docker")) => ExecutorChoice::DockerRegistered,
        ("docker", false, _) => ExecutorChoice::DockerRequested,
        _ => ExecutorChoice::SimulatedNoEngine,
    }
}

/// The local engine as start-up found it.
struct Engine {
    /// `None`: no client can be made for the endpoint (see `error`).
    docker: Option<DockerExecutor>,
    answered: bool,
    /// Why it did not answer; "" when it did.
    error: String,
    /// "Docker 27.1 (API 1.46), nvidia runtime: true" when it answered.
    version: String,
}

/// Pings the configured engine, unless the simulated executor was asked for.
async fn probe_engine(args: &NodeArgs, volume_dir: &Path) -> Engine {
    let silent = |docker, error: String| Engine { docker, answered: false, error, version: String::new() };
    if args.executor == "simulated" {
        return silent(None, String::new());
    }
    let docker = match DockerExecutor::connect_with_volume_dir(&args.docker_endpoint, volume_dir) {
        Ok(d) => d,
        Err(e) => return silent(None, e.to_string()),
    };
    match docker.ping().await {
        Ok(info) => {
            let version = format!(
                "Docker {} (API {}), nvidia runtime: {}",
                info.version, info.api_version, info.has_nvidia_runtime
            );
            Engine { docker: Some(docker), answered: true, error: String::new(), version }
        }
        Err(e) => silent(Some(docker), e.to_string()),
    }
}

fn log_choice(choice: ExecutorChoice, node: &str, engine: &Engine) {
    let error = engine.error.as_str();
    match choice {
        ExecutorChoice::SimulatedRequested => tracing::warn!("executor: SIMULATED (no containers are started)"),
        ExecutorChoice::DockerAnswers => tracing::info!(engine = %engine.version, "executor: Docker Engine"),
        ExecutorChoice::DockerRegistered => tracing::warn!(
            %node, error,
            "executor: Docker, but the engine is not answering (still starting?). The node stays a Docker node: its machines are left as they are, engine calls are retried, and it takes no new machines until the engine answers"
        ),
        ExecutorChoice::DockerRequested => {
            tracing::error!(%node, error, "executor: Docker Engine not answering yet; tasks wait until it does")
        }
        ExecutorChoice::SimulatedNoEngine => {
            tracing::warn!(%node, error, "executor: SIMULATED, no Docker Engine answers and this node has never run Docker")
        }
    }
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

#[cfg(test)]
mod tests {
    use super::{decide_executor, ExecutorChoice::*};

    #[test]
    fn a_node_registered_as_docker_stays_docker_while_its_engine_is_silent() {
        assert_eq!(decide_executor(Some("docker"), "auto", false), DockerRegistered);
        assert_eq!(decide_executor(Some("docker"), "docker", false), DockerRegistered);
        assert!(DockerRegistered.is_docker());
    }

    #[test]
    fn only_a_node_that_never_ran_docker_falls_back_to_simulated() {
        assert_eq!(decide_executor(None, "auto", false), SimulatedNoEngine);
        assert_eq!(decide_executor(Some("simulated"), "auto", false), SimulatedNoEngine);
        assert!(!SimulatedNoEngine.is_docker());
    }

    #[test]
    fn an_explicit_docker_request_is_kept_even_on_a_new_node() {
        assert_eq!(decide_executor(None, "docker", false), DockerRequested);
        assert_eq!(decide_executor(Some("simulated"), "docker", false), DockerRequested);
    }

    #[test]
    fn an_answering_engine_or_an_explicit_choice_wins() {
        for registered in [None, Some("docker"), Some("simulated")] {
            assert_eq!(decide_executor(registered, "auto", true), DockerAnswers);
            assert_eq!(decide_executor(registered, "docker", true), DockerAnswers);
            assert_eq!(decide_executor(registered, "simulated", false), SimulatedRequested);
        }
    }
}
