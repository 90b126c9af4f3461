//! A simulated node with two GPUs and a machine holding the first, for the
//! telemetry HTTP tests (the machine is made by SQL: holding a GPU is all
//! the sampler reads).
#![allow(dead_code)]

use gantry_platform::{
    cluster::{self, NodeRegistration},
    db::Pool,
    gpus, images, telemetry,
};

pub struct Cluster {
    pub node_id: i64,
    pub machine_id: i64,
}

/// `owner` owns the machine "cooker", whose GPU follows `pattern`;
/// `passes` sampling passes 10 s apart end now.
pub async fn cluster(pool: &Pool, owner: &str, pattern: &str, passes: i64) -> Cluster {
    let found =
        gpus::simulated("mnode", &gpus::SimulatedGpus { count: 2, model: "SIM \"A100\"".into(), memory_mb: 1024 });
    let reg = NodeRegistration {
        name: "mnode",
        region_code: "local",
        docker_endpoint: "simulated://mnode",
        volume_dir: "",
        executor: "simulated",
        cpu_count: 2,
        memory_mb: 1024,
        gpus: &found,
    };
    let node_id = cluster::register_node(pool, reg).await.unwrap();
    images::ensure_default_image(pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
    let machine_id: i64 = sqlx::query_scalar(
        "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb, state, created_at, updated_at, sim_pattern) \
         SELECT 'cooker', id, group_id, (SELECT MIN(id) FROM images), 1, 'SIM', ?, 'vol-cooker', 1, 'running', 0, 0, ? FROM users WHERE username = ? RETURNING id",
    )
    .bind(node_id)
    .bind(pattern)
    .bind(owner)
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query("INSERT INTO machine_gpus (gpu_id, machine_id) SELECT MIN(id), ? FROM gpus WHERE node_id = ?")
        .bind(machine_id)
        .bind(node_id)
        .execute(pool)
        .await
        .unwrap();
    let now = telemetry::now_ms();
    for k in (0..passes).rev() {
        telemetry::sample_once(pool, now - k * 10_000).await.unwrap();
    }
    Cluster { node_id, machine_id }
}
