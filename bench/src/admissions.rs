//! `gantry-bench admissions`: figures for the admission path on a simulated cluster, and the
//! installation `docker` (`docker.rs`) builds on. Prints numbers; asserts nothing.

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser},
    cluster::{self, NodeRegistration},
    db,
    gpus::{self, SimulatedGpus},
    images,
    machines::{Admissions, CreateMachine},
    PlatformError,
};
use std::{sync::Arc, time::Instant};
use tokio::sync::Notify;

pub(crate) struct Setup {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) pool: db::Pool,
    pub(crate) admissions: Admissions,
    pub(crate) wake: Arc<Notify>,
    pub(crate) user: accounts::User,
}

pub(crate) async fn setup(nodes: u32, gpus_per_node: u32, executor: &str, quota: i64) -> Result<Setup, PlatformError> {
    let tmp = tempfile::tempdir().map_err(|e| PlatformError::Internal(e.to_string()))?;
    let dir = tmp.path().to_path_buf();
    let pool = db::connect_file(&dir.join("bench.db")).await?;
    db::migrate(&pool).await?;
    let sim = SimulatedGpus { count: gpus_per_node, model: "SIM-A100-80GB".into(), memory_mb: 81_920 };
    for n in 0..nodes {
        let name = format!("node-{n:04}");
        let gpus = gpus::simulated(&name, &sim);
        let (endpoint, volume_dir) = match executor {
            "docker" => ("unix:///var/run/docker.sock".to_string(), dir.join("volumes").to_string_lossy().into_owned()),
            _ => (format!("simulated://{name}"), String::new()),
        };
        let reg = NodeRegistration {
            name: &name,
            region_code: "local",
            docker_endpoint: &endpoint,
            volume_dir: &volume_dir,
            executor,
            cpu_count: 64,
            memory_mb: 512_000,
            gpus: &gpus,
        };
        cluster::register_node(&pool, reg).await?;
    }
    images::ensure_default_image(&pool, "devbox", "gantry/devbox:latest", "bench").await?;
    accounts::create_group(&pool, None, "bench", quota).await?;
    let user = accounts::create_user(
        &pool,
        None,
        NewUser { username: "bench", password: "bench-password", role: Role::User, group: Some("bench") },
    )
    .await?;
    let wake = Arc::new(Notify::new());
    let admissions = Admissions::start(pool.clone(), wake.clone());
    Ok(Setup { dir: tmp, pool, admissions, wake, user })
}

pub(crate) fn request(s: &Setup, i: usize) -> CreateMachine {
    CreateMachine::new(s.user.clone(), format!("m{i}"), 1, 1)
}

/// (a) Durable admissions per second through the real admission path.
pub async fn admissions(nodes: u32, gpus_per_node: u32, requests: usize) -> Result<(), PlatformError> {
    let s = setup(nodes, gpus_per_node, "simulated", i64::from(nodes * gpus_per_node)).await?;
    println!("cluster: {nodes} nodes x {gpus_per_node} GPUs (simulated), SQLite WAL, synchronous=NORMAL");
    let started = Instant::now();
    let mut handles = Vec::with_capacity(requests);
    for i in 0..requests {
        let (adm, req) = (s.admissions.clone(), request(&s, i));
        handles.push(tokio::spawn(async move { adm.create(req).await }));
    }
    let (mut ok, mut refused) = (0usize, 0usize);
    for h in handles {
        match h.await.map_err(|e| PlatformError::Internal(e.to_string()))? {
            Ok(_) => ok += 1,
            Err(_) => refused += 1,
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let in_use: i64 =
        sqlx::query_scalar("SELECT gpus_in_use FROM groups WHERE name = 'bench'").fetch_one(&s.pool).await?;
    println!("admissions: {requests} requests, {ok} admitted, {refused} refused in {secs:.3} s");
    println!("admissions/s: {:.0}  (group now holds {in_use} GPUs; each admission = machine + GPUs + quota + task + audit rows, committed)", requests as f64 / secs);
    Ok(())
}
