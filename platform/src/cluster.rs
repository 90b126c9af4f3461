//! Worker nodes and their GPUs in the database, and the cluster snapshot
//! the scheduling core decides from.

use crate::{audit, db::Pool, gpus::DiscoveredGpu, now, PlatformError};
use gantry_core::alloc::{ClusterView, GpuView, NodeState, NodeView};
use serde::Serialize;
use sqlx::SqliteConnection;
use std::collections::HashMap;

/// A node that has not sent a heartbeat for this long takes no new machines.
pub const HEARTBEAT_TIMEOUT_SECS: i64 = 60;

pub struct NodeRegistration<'a> {
    pub name: &'a str,
    pub region_code: &'a str,
    /// Explicit: unix:///path, tcp://host:port, tls://host:port, or
    /// simulated://NAME.
    pub docker_endpoint: &'a str,
    /// Loop-volume images directory on that host; "" for plain volumes.
    pub volume_dir: &'a str,
    /// "docker" or "simulated".
    pub executor: &'a str,
    pub cpu_count: i64,
    pub memory_mb: i64,
    pub gpus: &'a [DiscoveredGpu],
}

/// Creates or refreshes a node and its GPU list, and marks it alive. GPUs
/// that disappeared are removed unless a machine still holds them.
pub async fn register_node(pool: &Pool, reg: NodeRegistration<'_>) -> Result<i64, PlatformError> {
    if reg.docker_endpoint.trim().is_empty() {
        return Err(PlatformError::BadRequest(format!("node {} needs an explicit engine endpoint", reg.name)));
    }
    let mut tx = crate::transitions::begin(pool).await?;
    let region: Option<(i64,)> = sqlx::query_as("SELECT id FROM regions WHERE code = ?").bind(reg.region_code).fetch_optional(&mut *tx).await?;
    let region_id = region.ok_or_else(|| PlatformError::NotFound(format!("region {}", reg.region_code)))?.0;
    let now = now();
    let (node_id,): (i64,) = sqlx::query_as(
        "INSERT INTO nodes (name, region_id, docker_endpoint, volume_dir, executor, state, last_heartbeat, cpu_count, memory_mb, created_at)
         VALUES (?, ?, ?, ?, ?, 'ready', ?, ?, ?, ?)
         ON CONFLICT(name) DO UPDATE SET docker_endpoint = excluded.docker_endpoint, volume_dir = excluded.volume_dir, executor = excluded.executor,
             last_heartbeat = excluded.last_heartbeat, cpu_count = excluded.cpu_count, memory_mb = excluded.memory_mb
         RETURNING id",
    )
    .bind(reg.name)
    .bind(region_id)
    .bind(reg.docker_endpoint)
    .bind(reg.volume_dir)
    .bind(reg.executor)
    .bind(now)
    .bind(reg.cpu_count)
    .bind(reg.memory_mb)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    for g in reg.gpus {
        sqlx::query(
            "INSERT INTO gpus (node_id, idx, uuid, model, memory_mb, simulated) VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT(node_id, idx) DO UPDATE SET uuid = excluded.uuid, model = excluded.model,
                 memory_mb = excluded.memory_mb, simulated = excluded.simulated",
        )
        .bind(node_id)
        .bind(g.index as i64)
        .bind(&g.uuid)
        .bind(&g.model)
        .bind(g.memory_mb)
        .bind(g.simulated)
        .execute(&mut *tx)
        .await?;
    }
    let keep: Vec<i64> = reg.gpus.iter().map(|g| g.index as i64).collect();
    let held_gone: Vec<(i64,)> = sqlx::query_as(
        "SELECT g.idx FROM gpus g JOIN machine_gpus mg ON mg.gpu_id = g.id WHERE g.node_id = ?",
    )
    .bind(node_id)
    .fetch_all(&mut *tx)
    .await?;
    for (idx,) in sqlx::query_as::<_, (i64,)>("SELECT idx FROM gpus WHERE node_id = ?").bind(node_id).fetch_all(&mut *tx).await? {
        if !keep.contains(&idx) && !held_gone.iter().any(|(h,)| *h == idx) {
            sqlx::query("DELETE FROM gpus WHERE node_id = ? AND idx = ?").bind(node_id).bind(idx).execute(&mut *tx).await?;
        }
    }
    audit::record(&mut *tx, None, "node.register", &format!("node {} with {} GPU(s), executor {}", reg.name, reg.gpus.len(), reg.executor)).await?;
    tx.commit().await?;
    Ok(node_id)
}

/// amd64 or arm64: which region images the node can run.
pub async fn set_node_arch(pool: &Pool, node_id: i64, arch: gantry_core::matching::Arch) -> Result<(), PlatformError> {
    sqlx::query("UPDATE nodes SET arch = ? WHERE id = ?").bind(arch.as_str()).bind(node_id).execute(pool).await?;
    Ok(())
}

/// This host's architecture, as region images name it.
pub fn host_arch() -> gantry_core::matching::Arch {
    match std::env::consts::ARCH {
        "aarch64" => gantry_core::matching::Arch::Arm64,
        _ => gantry_core::matching::Arch::Amd64,
    }
}

pub async fn heartbeat(pool: &Pool, node_id: i64) -> Result<(), PlatformError> {
    sqlx::query("UPDATE nodes SET last_heartbeat = ? WHERE id = ?").bind(now()).bind(node_id).execute(pool).await?;
    Ok(())
}

/// The whole cluster as the scheduling core sees it, read inside the
/// caller's transaction so the decision and its writes see the same state.
pub async fn load_view(conn: &mut SqliteConnection) -> Result<ClusterView, PlatformError> {
    let nodes: Vec<(i64, String, String, i64)> =
        sqlx::query_as("SELECT id, name, state, last_heartbeat FROM nodes ORDER BY id").fetch_all(&mut *conn).await?;
    let gpus: Vec<(i64, i64, String, String, bool)> = sqlx::query_as(
        "SELECT g.node_id, g.idx, g.uuid, g.model, mg.gpu_id IS NOT NULL
         FROM gpus g LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id ORDER BY g.node_id, g.idx",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut by_node: HashMap<i64, Vec<GpuView>> = HashMap::new();
    for (node_id, idx, uuid, model, taken) in gpus {
        by_node.entry(node_id).or_default().push(GpuView { index: idx as u32, uuid, model, taken });
    }
    let nodes = nodes
        .into_iter()
        .map(|(id, name, state, last_heartbeat)| NodeView {
            gpus: by_node.remove(&id).unwrap_or_default(),
            id,
            name,
            // An unreadable state must never make a node schedulable.
            state: state.parse().unwrap_or(NodeState::Down),
            last_heartbeat,
        })
        .collect();
    Ok(ClusterView { nodes, heartbeat_timeout_secs: HEARTBEAT_TIMEOUT_SECS })
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct NodeSummary {
    pub id: i64,
    pub name: String,
    pub region: String,
    pub executor: String,
    pub docker_endpoint: String,
    pub state: String,
    pub state_reason: String,
    pub arch: String,
    pub last_heartbeat: i64,
    pub cpu_count: i64,
    pub memory_mb: i64,
    pub gpu_total: i64,
    pub gpu_free: i64,
    pub gpu_models: String,
    pub simulated: bool,
}

pub async fn list_nodes(pool: &Pool) -> Result<Vec<NodeSummary>, PlatformError> {
    Ok(sqlx::query_as(
        "SELECT n.id, n.name, r.code AS region, n.executor, n.docker_endpoint, n.state, n.state_reason, n.arch, n.last_heartbeat, n.cpu_count, n.memory_mb,
                COUNT(g.id) AS gpu_total,
                COUNT(g.id) - COUNT(mg.gpu_id) AS gpu_free,
                COALESCE(GROUP_CONCAT(DISTINCT g.model), '') AS gpu_models,
                COALESCE(MAX(g.simulated), 0) AS simulated
         FROM nodes n JOIN regions r ON r.id = n.region_id
         LEFT JOIN gpus g ON g.node_id = n.id LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id
         GROUP BY n.id ORDER BY n.name",
    )
    .fetch_all(pool)
    .await?)
}

/// GPU models present in the cluster, for the create form.
pub async fn gpu_models(pool: &Pool) -> Result<Vec<String>, PlatformError> {
    Ok(sqlx::query_scalar("SELECT DISTINCT model FROM gpus ORDER BY model").fetch_all(pool).await?)
}
