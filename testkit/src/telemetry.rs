//! Installations for the telemetry tests: a node with simulated GPUs and
//! machines made by SQL (what holds which GPU is all the sampler reads).
//! [`fixture`] is a database of its own (the platform's tests), [`cluster`]
//! goes into a server's database (the pages and `/metrics`).

use crate::install::{self, Install};
use gantry_core::Role;
use gantry_platform::{db::Pool, gpus, images, telemetry};

/// A node on the simulated engine with `count` GPUs of `model`, and the
/// demo image: the node's id and its GPUs' ids in index order.
pub async fn simulated_node(pool: &Pool, name: &str, count: u32, model: &str, memory_mb: i64) -> (i64, Vec<i64>) {
    let found = gpus::simulated(name, &gpus::SimulatedGpus { count, model: model.into(), memory_mb });
    let node_id = install::register_simulated(pool, name, &found).await.unwrap();
    images::ensure_default_image(pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
    let gpu_ids = sqlx::query_scalar("SELECT id FROM gpus WHERE node_id = ? ORDER BY idx")
        .bind(node_id)
        .fetch_all(pool)
        .await
        .unwrap();
    (node_id, gpu_ids)
}

/// A machine row, as `machine_by_sql` writes it.
pub struct MachineRow<'a> {
    pub name: &'a str,
    pub owner_id: i64,
    pub node_id: i64,
    pub state: &'a str,
    /// The GPUs it holds (its `gpu_count` is how many, at least 1).
    pub gpus: &'a [i64],
    pub gpu_model: &'a str,
    /// Its `sim_pattern` (None: unset).
    pub pattern: Option<&'a str>,
}

/// Writes a machine of `row.owner_id`'s (in the owner's group, on the
/// first image, volume `vol-<name>`) holding `row.gpus`; its id.
pub async fn machine_by_sql(pool: &Pool, row: MachineRow<'_>) -> i64 {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb, state, created_at, updated_at, sim_pattern) \
         SELECT ?, u.id, u.group_id, (SELECT MIN(id) FROM images), ?, ?, ?, 'vol-' || ?, 1, ?, 0, 0, ? FROM users u WHERE u.id = ? RETURNING id",
    )
    .bind(row.name)
    .bind(row.gpus.len().max(1) as i64)
    .bind(row.gpu_model)
    .bind(row.node_id)
    .bind(row.name)
    .bind(row.state)
    .bind(row.pattern)
    .bind(row.owner_id)
    .fetch_one(pool)
    .await
    .unwrap();
    for g in row.gpus {
        sqlx::query("INSERT INTO machine_gpus (gpu_id, machine_id) VALUES (?, ?)")
            .bind(g)
            .bind(id)
            .execute(pool)
            .await
            .unwrap();
    }
    id
}

/// A database of its own with node `tnode` and user `tina` (in no group).
pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub pool: Pool,
    pub node_id: i64,
    pub gpu_ids: Vec<i64>,
    pub user_id: i64,
}

/// `gpu_count` SIM-A100 GPUs of 80 GiB on `tnode`.
pub async fn fixture(gpu_count: u32) -> Fixture {
    let Install { dir, pool } = Install::new().await;
    let (node_id, gpu_ids) = simulated_node(&pool, "tnode", gpu_count, "SIM-A100", 81_920).await;
    let user = install::user(&pool, "tina", "password-123", Role::User, None).await;
    Fixture { _dir: dir, pool, node_id, gpu_ids, user_id: user.id }
}

impl Fixture {
    /// A machine of tina's in `state` holding `gpus`, following `pattern`
    /// (None: unset).
    pub async fn machine(&self, name: &str, state: &str, gpus: &[i64], pattern: Option<&str>) -> i64 {
        let row = MachineRow {
            name,
            owner_id: self.user_id,
            node_id: self.node_id,
            state,
            gpus,
            gpu_model: "SIM-A100",
            pattern,
        };
        machine_by_sql(&self.pool, row).await
    }

    /// Frees `gpus` (as a delete or a move does).
    pub async fn release(&self, gpus: &[i64]) {
        for g in gpus {
            sqlx::query("DELETE FROM machine_gpus WHERE gpu_id = ?").bind(g).execute(&self.pool).await.unwrap();
        }
    }

    pub async fn count(&self, sql: &str) -> i64 {
        install::count(&self.pool, sql).await
    }
}

/// Node `mnode` (two GPUs) and the running machine "cooker" on the first.
pub struct Cluster {
    pub node_id: i64,
    pub machine_id: i64,
}

/// Into `pool`: `owner` (a username) owns the machine "cooker", whose GPU
/// follows `pattern`; `passes` sampling passes 10 s apart end now.
pub async fn cluster(pool: &Pool, owner: &str, pattern: &str, passes: i64) -> Cluster {
    let (node_id, gpu_ids) = simulated_node(pool, "mnode", 2, "SIM \"A100\"", 1024).await;
    let owner_id =
        sqlx::query_scalar("SELECT id FROM users WHERE username = ?").bind(owner).fetch_one(pool).await.unwrap();
    let first = *gpu_ids.iter().min().expect("the node has GPUs");
    let row = MachineRow {
        name: "cooker",
        owner_id,
        node_id,
        state: "running",
        gpus: &[first],
        gpu_model: "SIM",
        pattern: Some(pattern),
    };
    let machine_id = machine_by_sql(pool, row).await;
    let now = telemetry::now_ms();
    for k in (0..passes).rev() {
        telemetry::sample_once(pool, now - k * 10_000).await.unwrap();
    }
    Cluster { node_id, machine_id }
}
