//! A temporary installation for the telemetry tests: a SQLite file with the
//! real migrations, one node with simulated GPUs, and machines made by SQL
//! (what holds which GPU is all the sampler reads).
#![allow(dead_code)]

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser},
    cluster::{self, NodeRegistration},
    db, gpus, images,
};

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub pool: db::Pool,
    pub node_id: i64,
    pub gpu_ids: Vec<i64>,
    pub user_id: i64,
}

pub async fn fixture(gpu_count: u32) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
    db::migrate(&pool).await.unwrap();
    let sim = gpus::SimulatedGpus { count: gpu_count, model: "SIM-A100".into(), memory_mb: 81_920 };
    let found = gpus::simulated("tnode", &sim);
    let reg = NodeRegistration {
        name: "tnode",
        region_code: "local",
        docker_endpoint: "simulated://tnode",
        volume_dir: "",
        executor: "simulated",
        cpu_count: 2,
        memory_mb: 1024,
        gpus: &found,
    };
    let node_id = cluster::register_node(&pool, reg).await.unwrap();
    images::ensure_default_image(&pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
    let user = accounts::create_user(
        &pool,
        None,
        NewUser { username: "tina", password: "password-123", role: Role::User, group: None },
    )
    .await
    .unwrap();
    let gpu_ids = sqlx::query_scalar("SELECT id FROM gpus WHERE node_id = ? ORDER BY idx")
        .bind(node_id)
        .fetch_all(&pool)
        .await
        .unwrap();
    Fixture { _dir: dir, pool, node_id, gpu_ids, user_id: user.id }
}

impl Fixture {
    /// A machine in `state` holding `gpus`, following `pattern` (None: unset).
    pub async fn machine(&self, name: &str, state: &str, gpus: &[i64], pattern: Option<&str>) -> i64 {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb, state, created_at, updated_at, sim_pattern) \
             SELECT ?, u.id, u.group_id, (SELECT MIN(id) FROM images), ?, 'SIM-A100', ?, 'vol-' || ?, 1, ?, 0, 0, ? FROM users u WHERE u.id = ? RETURNING id",
        )
        .bind(name)
        .bind(gpus.len().max(1) as i64)
        .bind(self.node_id)
        .bind(name)
        .bind(state)
        .bind(pattern)
        .bind(self.user_id)
        .fetch_one(&self.pool)
        .await
        .unwrap();
        for g in gpus {
            sqlx::query("INSERT INTO machine_gpus (gpu_id, machine_id) VALUES (?, ?)")
                .bind(g)
                .bind(id)
                .execute(&self.pool)
                .await
                .unwrap();
        }
        id
    }

    /// Frees `gpus` (as a delete or a move does).
    pub async fn release(&self, gpus: &[i64]) {
        for g in gpus {
            sqlx::query("DELETE FROM machine_gpus WHERE gpu_id = ?").bind(g).execute(&self.pool).await.unwrap();
        }
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
    }
}
