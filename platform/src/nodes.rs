//! Node lifecycle beyond the local node: an admin adds a worker node by its
//! engine endpoint (the connection is tested before anything is saved) or
//! a simulated node (`simulated://NAME`: simulated GPUs and the simulated
//! executor, as the local node without Docker has), and the monitor keeps
//! every node's heartbeat from its engine's answers.

use crate::{
    cluster::{self, NodeRegistration},
    db::Pool,
    executor::SimulatedExecutor,
    fleet::{executor_for, Fleet},
    gpus::{self, SimulatedGpus},
    PlatformError,
};
use gantry_core::{alloc::NodeState, validate};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct AddNode {
    pub name: String,
    pub region_code: String,
    /// unix:///path, tcp://host:port or tls://host:port; or
    /// simulated://NAME (NAME: the node's name) for a simulated node.
    pub endpoint: String,
    /// GPUs the admin declares on that host (Gantry cannot run NVML there);
    /// they are labelled simulated/declared in the UI. On a simulated node:
    /// its simulated GPUs.
    pub gpu_count: u32,
    pub gpu_model: String,
    /// "amd64" or "arm64"; empty: amd64.
    pub arch: String,
}

/// The model of a simulated node's GPUs when the admin names none (the
/// local node's `--sim-gpu-model` default).
pub const SIM_GPU_MODEL: &str = "SIM-A100-80GB";
/// The memory of each simulated GPU, as the local node's.
pub const SIM_GPU_MEMORY_MB: i64 = 81_920;

/// The node already at an engine address (stored as `engine_endpoint`
/// gives it; rows written before that, with a trailing `/` or an upper-case
/// host, are found too).
pub(crate) const TWIN: &str = "SELECT name FROM nodes WHERE (docker_endpoint = ?1 OR rtrim(lower(docker_endpoint), '/') = lower(?1)) AND state <> 'lost'";

/// Checks the request, tests the connection, then registers the node.
/// Nothing is saved when the engine does not answer.
pub async fn add_node(pool: &Pool, fleet: &Fleet, actor: i64, req: &AddNode) -> Result<i64, PlatformError> {
    if let Some(sim_name) = gantry_core::endpoint::simulated_name(&req.endpoint) {
        return add_simulated(pool, fleet, actor, req, sim_name).await;
    }
    validate::name("node name", &req.name)?;
    validate::in_range("GPU count", req.gpu_count as i64, 0, 64)?;
    let endpoint = gantry_core::endpoint::engine_endpoint(&req.endpoint).map_err(PlatformError::BadRequest)?;
    let endpoint = endpoint.as_str();
    let arch = parse_arch(&req.arch)?;
    let model = req.gpu_model.trim();
    if req.gpu_count > 0 && (model.is_empty() || model.len() > 64) {
        return Err(PlatformError::BadRequest("GPU model must be 1 to 64 characters".into()));
    }
    let exists: Option<i64> =
        sqlx::query_scalar("SELECT id FROM nodes WHERE name = ?").bind(&req.name).fetch_optional(pool).await?;
    if exists.is_some() {
        return Err(PlatformError::Conflict(format!("a node named {} exists already", req.name)));
    }
    // One engine, one node: a second row would offer its GPUs twice. (A
    // lost node's engine may come back as a new node: the collector then
    // removes what the lost machines left there.)
    let twin: Option<String> = sqlx::query_scalar(TWIN).bind(endpoint).fetch_optional(pool).await?;
    if let Some(twin) = twin {
        return Err(PlatformError::Conflict(format!("node {twin} already has the engine at {endpoint}")));
    }
    let executor = executor_for("docker", endpoint, "")?;
    let info = executor
        .ping()
        .await
        .map_err(|e| PlatformError::BadRequest(format!("connection test failed, nothing saved: {e}")))?;
    let found =
        gpus::simulated(&req.name, &SimulatedGpus { count: req.gpu_count, model: model.to_string(), memory_mb: 0 });
    let added = format!("node {} at {endpoint} (Docker {}), {} declared GPU(s)", req.name, info.version, req.gpu_count);
    let id = cluster::register_node_as(
        pool,
        NodeRegistration {
            name: &req.name,
            region_code: &req.region_code,
            docker_endpoint: endpoint,
            volume_dir: "",
            executor: "docker",
            cpu_count: 0,
            memory_mb: 0,
            gpus: &found,
        },
        Some(arch),
        Some((actor, &added)),
    )
    .await?;
    fleet.insert(id, executor);
    Ok(id)
}

fn parse_arch(arch: &str) -> Result<gantry_core::matching::Arch, PlatformError> {
    match arch.trim() {
        "" => Ok(gantry_core::matching::Arch::Amd64),
        a => a.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::BadRequest(e.to_string())),
    }
}

/// Adds a simulated node, `simulated://NAME`: no engine to test, the
/// simulated executor (machines are records, no containers) and
/// `gpu_count` simulated GPUs (model: [`SIM_GPU_MODEL`] when none is
/// named) — the path the local node takes without Docker. NAME is the
/// node's name (an empty name field takes it); the name rules, the
/// region and the duplicate checks are those of any node, and the add is
/// audited in the same commit.
async fn add_simulated(
    pool: &Pool,
    fleet: &Fleet,
    actor: i64,
    req: &AddNode,
    sim_name: &str,
) -> Result<i64, PlatformError> {
    let name = match req.name.trim() {
        "" => sim_name,
        n => n,
    };
    validate::name("node name", name)?;
    if sim_name != name {
        return Err(PlatformError::BadRequest(format!(
            "a simulated node's endpoint is simulated://<its name>: simulated://{name} for node {name}"
        )));
    }
    validate::in_range("GPU count", req.gpu_count as i64, 0, 64)?;
    let arch = parse_arch(&req.arch)?;
    let model = match req.gpu_model.trim() {
        "" => SIM_GPU_MODEL,
        m if m.len() > 64 => return Err(PlatformError::BadRequest("GPU model must be 1 to 64 characters".into())),
        m => m,
    };
    let endpoint = format!("{}{name}", gantry_core::endpoint::SIMULATED_SCHEME);
    let found = gpus::simulated(
        name,
        &SimulatedGpus { count: req.gpu_count, model: model.to_string(), memory_mb: SIM_GPU_MEMORY_MB },
    );
    let added = format!(
        "simulated node {name} ({endpoint}) in region {}, {} simulated GPU(s) {model}",
        req.region_code, req.gpu_count
    );
    // The name and endpoint checks run in register_node_as's transaction.
    let id = cluster::register_node_as(
        pool,
        NodeRegistration {
            name,
            region_code: &req.region_code,
            docker_endpoint: &endpoint,
            volume_dir: "",
            executor: "simulated",
            cpu_count: 0,
            memory_mb: 0,
            gpus: &found,
        },
        Some(arch),
        Some((actor, &added)),
    )
    .await?;
    fleet.insert(id, SimulatedExecutor::new().into());
    Ok(id)
}

/// How long one engine may take to answer the monitor's ping.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Pings every node that is not lost and records a heartbeat for each that
/// answers; a silent node's heartbeat goes stale and it takes nothing new.
pub async fn monitor_once(pool: &Pool, fleet: &Fleet) -> Result<Vec<String>, PlatformError> {
    monitor_with(pool, fleet, PING_TIMEOUT).await
}

/// [`monitor_once`] with another ping timeout. The nodes are pinged all at
/// once and each heartbeat is written as its engine answers: one after
/// another, a few black-holed engines (powered-off hosts set down) made a
/// pass outlast the heartbeat's 60 s, and healthy nodes looked stale.
pub async fn monitor_with(pool: &Pool, fleet: &Fleet, ping_timeout: Duration) -> Result<Vec<String>, PlatformError> {
    let nodes = fleet.all(pool).await?.into_iter().filter(|n| n.state != NodeState::Lost);
    let pings = nodes.map(|node| async move {
        let answered = match &node.executor {
            Ok(exec) => matches!(tokio::time::timeout(ping_timeout, exec.ping()).await, Ok(Ok(_))),
            Err(_) => false,
        };
        if answered {
            // Its free disk, where the node's state is refreshed.
            if let Ok(exec) = &node.executor {
                match tokio::time::timeout(ping_timeout, crate::disk::nodes::measure(pool, exec, node.id)).await {
                    Ok(Ok(())) => {}
                    // The heartbeat still counts: the last figure stays.
                    Ok(Err(e)) => tracing::warn!(node = %node.name, error = %e, "node disk not recorded"),
                    Err(_) => tracing::warn!(node = %node.name, "node disk not measured in time"),
                }
            }
            cluster::heartbeat(pool, node.id).await.map(|_| None)
        } else {
            Ok(Some(node.name))
        }
    });
    let mut silent = Vec::new();
    for outcome in futures_util::future::join_all(pings).await {
        silent.extend(outcome?);
    }
    Ok(silent)
}

/// Runs `monitor_once` every `period` until the process ends.
pub async fn monitor(pool: Pool, fleet: Fleet, period: Duration) {
    let mut tick = tokio::time::interval(period);
    loop {
        tick.tick().await;
        let (p, f) = (pool.clone(), fleet.clone());
        match crate::contained::pass("node monitor", async move { monitor_once(&p, &f).await }).await {
            Some(Ok(silent)) if !silent.is_empty() => {
                tracing::warn!(?silent, "engines not answering; heartbeats withheld")
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) => tracing::error!(error = %e, "node monitor failed"),
        }
    }
}
