//! The executor for each worker node, made on first use from the node's
//! row (Docker endpoint, or the simulated executor) and then reused.

use crate::{
    db::Pool,
    executor::{DockerExecutor, Executor, SimulatedExecutor},
    PlatformError,
};
use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
};

#[derive(Clone)]
pub struct Fleet {
    executors: Arc<Mutex<HashMap<i64, Executor>>>,
    /// Where loop-device volume images of local Docker nodes are kept.
    volume_dir: PathBuf,
}

impl Fleet {
    pub fn new(volume_dir: impl Into<PathBuf>) -> Fleet {
        Fleet { executors: Arc::default(), volume_dir: volume_dir.into() }
    }

    /// Uses `executor` for `node_id` (start-up wiring and tests).
    pub fn insert(&self, node_id: i64, executor: Executor) {
        self.executors.lock().expect("fleet lock").insert(node_id, executor);
    }

    pub async fn executor(&self, pool: &Pool, node_id: i64) -> Result<Executor, PlatformError> {
        if let Some(e) = self.executors.lock().expect("fleet lock").get(&node_id) {
            return Ok(e.clone());
        }
        let row: Option<(String, String)> = sqlx::query_as("SELECT executor, docker_endpoint FROM nodes WHERE id = ?")
            .bind(node_id)
            .fetch_optional(pool)
            .await?;
        let (kind, endpoint) = row.ok_or_else(|| PlatformError::NotFound(format!("node #{node_id}")))?;
        let executor: Executor = match kind.as_str() {
            "docker" => DockerExecutor::connect_with_volume_dir(&endpoint, self.volume_dir.clone()).map_err(|e| PlatformError::Internal(e.to_string()))?.into(),
            _ => SimulatedExecutor::new().into(),
        };
        Ok(self.executors.lock().expect("fleet lock").entry(node_id).or_insert(executor).clone())
    }

    /// Every node with its executor, for the reconciler.
    pub async fn all(&self, pool: &Pool) -> Result<Vec<(i64, String, Executor)>, PlatformError> {
        let nodes: Vec<(i64, String)> = sqlx::query_as("SELECT id, name FROM nodes ORDER BY id").fetch_all(pool).await?;
        let mut out = Vec::with_capacity(nodes.len());
        for (id, name) in nodes {
            out.push((id, name, self.executor(pool, id).await?));
        }
        Ok(out)
    }
}
