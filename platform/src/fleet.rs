//! The executor for each worker node, made on first use from the node's
//! row (its explicit Docker endpoint and volume directory, or the
//! simulated executor) and then reused.

use crate::{
    db::Pool,
    executor::{DockerExecutor, Executor, SimulatedExecutor},
    PlatformError,
};
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

#[derive(Clone, Default)]
pub struct Fleet {
    executors: Arc<Mutex<HashMap<i64, Executor>>>,
}

/// One node as the reconciler visits it: its executor, or why there is none.
pub struct FleetNode {
    pub id: i64,
    pub name: String,
    pub state: gantry_core::alloc::NodeState,
    pub executor: Result<Executor, PlatformError>,
}

impl Fleet {
    pub fn new() -> Fleet {
        Fleet::default()
    }

    /// Forgets a removed node's executor.
    pub fn forget(&self, node_id: i64) {
        self.executors.lock().expect("fleet lock").remove(&node_id);
    }

    /// Uses `executor` for `node_id` (start-up wiring and tests).
    pub fn insert(&self, node_id: i64, executor: Executor) {
        self.executors.lock().expect("fleet lock").insert(node_id, executor);
    }

    pub async fn executor(&self, pool: &Pool, node_id: i64) -> Result<Executor, PlatformError> {
        if let Some(e) = self.executors.lock().expect("fleet lock").get(&node_id) {
            return Ok(e.clone());
        }
        let row: Option<(String, String, String)> =
            sqlx::query_as("SELECT executor, docker_endpoint, volume_dir FROM nodes WHERE id = ?")
                .bind(node_id)
                .fetch_optional(pool)
                .await?;
        let (kind, endpoint, volume_dir) = row.ok_or_else(|| PlatformError::NotFound(format!("node #{node_id}")))?;
        let executor = executor_for(&kind, &endpoint, &volume_dir)?;
        Ok(self.executors.lock().expect("fleet lock").entry(node_id).or_insert(executor).clone())
    }

    /// Every node with its executor (or the reason it has none), for the
    /// reconciler: one misconfigured node never hides the others.
    pub async fn all(&self, pool: &Pool) -> Result<Vec<FleetNode>, PlatformError> {
        let nodes: Vec<(i64, String, String)> =
            sqlx::query_as("SELECT id, name, state FROM nodes ORDER BY id").fetch_all(pool).await?;
        let mut out = Vec::with_capacity(nodes.len());
        for (id, name, state) in nodes {
            // The table allows only known states; were one unreadable, the
            // node is treated as down (pinged, never scheduled), as
            // `cluster::load_view` does.
            let state = state.parse().unwrap_or(gantry_core::alloc::NodeState::Down);
            out.push(FleetNode { executor: self.executor(pool, id).await, id, name, state });
        }
        Ok(out)
    }
}

/// The executor a node row describes.
pub fn executor_for(kind: &str, endpoint: &str, volume_dir: &str) -> Result<Executor, PlatformError> {
    let bad = |e: crate::executor::ExecError| PlatformError::BadRequest(e.to_string());
    Ok(match kind {
        "simulated" => SimulatedExecutor::new().into(),
        _ if volume_dir.is_empty() => DockerExecutor::connect(endpoint).map_err(bad)?.into(),
        _ => DockerExecutor::connect_with_volume_dir(endpoint, volume_dir).map_err(bad)?.into(),
    })
}
