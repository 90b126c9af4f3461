//! `gantry-bench admissions` and `docker`: figures for the admission path and for dev machines on
//! the local Docker Engine. Prints numbers; asserts nothing.

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser},
    cluster::{self, NodeRegistration},
    db,
    dispatch::Dispatcher,
    executor::{DockerExecutor, Executor},
    fleet::Fleet,
    gpus::{self, SimulatedGpus},
    images,
    machines::{Admissions, CreateMachine},
    PlatformError,
};
use std::{sync::Arc, time::Instant};
use tokio::sync::Notify;

struct Setup {
    _dir: tempfile::TempDir,
    pool: db::Pool,
    admissions: Admissions,
    wake: Arc<Notify>,
    user: accounts::User,
}

async fn setup(nodes: u32, gpus_per_node: u32, executor: &str, quota: i64) -> Result<Setup, PlatformError> {
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
    Ok(Setup { _dir: tmp, pool, admissions, wake, user })
}

fn request(s: &Setup, i: usize) -> CreateMachine {
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

/// (b) Dev machines created at once until running, next to raw Engine API
/// create+start of the same image in the same run.
pub async fn docker(machines: usize) -> Result<(), PlatformError> {
    let raw_exec = DockerExecutor::connect("").map_err(|e| PlatformError::Internal(e.to_string()))?;
    raw_exec.ping().await.map_err(|e| PlatformError::Internal(format!("{e}; run scripts/dockerd.sh")))?;
    let raw = raw_engine(machines).await?;

    let s = setup(1, machines as u32, "docker", machines as i64).await?;
    let fleet = Fleet::new();
    let dispatcher = Dispatcher::new(s.pool.clone(), fleet.clone(), s.wake.clone(), machines);
    tokio::spawn(dispatcher.run());
    let started = Instant::now();
    let mut handles = Vec::new();
    for i in 0..machines {
        let (adm, req) = (s.admissions.clone(), request(&s, i));
        handles.push(tokio::spawn(async move { adm.create(req).await }));
    }
    for h in handles {
        h.await.map_err(|e| PlatformError::Internal(e.to_string()))??;
    }
    // Wait for the dispatcher by watching the task table.
    loop {
        let open: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE state NOT IN ('succeeded', 'failed', 'cancelled')")
                .fetch_one(&s.pool)
                .await?;
        if open == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let gantry_secs = started.elapsed().as_secs_f64();
    let running: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM machines WHERE state = 'running'").fetch_one(&s.pool).await?;
    let enforced: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM machines WHERE volume_enforced = 1").fetch_one(&s.pool).await?;
    println!("raw Engine API: {machines} x (volume + create + start) at once: {raw:.3} s");
    println!("gantry: {machines} machines admitted and running ({running} running, {enforced} with size-enforced volumes): {gantry_secs:.3} s");
    println!("ratio gantry/raw: {:.2}", gantry_secs / raw);
    // Clean up through the same path a user would take.
    let exec: Executor = fleet.executor(&s.pool, 1).await?;
    let instance = gantry_platform::machines::instance_id(&s.pool).await?;
    for c in exec.list_managed(&instance).await.map_err(|e| PlatformError::Internal(e.to_string()))? {
        let _ = exec.remove_container(&c.id).await;
    }
    let volumes: Vec<String> = sqlx::query_scalar("SELECT volume_name FROM machines").fetch_all(&s.pool).await?;
    for name in volumes {
        let _ = exec.remove_volume(&name).await;
    }
    Ok(())
}

/// The same work straight through bollard: plain volume, container, start.
async fn raw_engine(n: usize) -> Result<f64, PlatformError> {
    use bollard::{
        models::{ContainerCreateBody, HostConfig, VolumeCreateRequest},
        query_parameters::{CreateContainerOptions, RemoveContainerOptions, StartContainerOptions},
        Docker,
    };
    let err = |e: bollard::errors::Error| PlatformError::Internal(e.to_string());
    let docker = Docker::connect_with_defaults().map_err(err)?.negotiate_version().await.map_err(err)?;
    let tag = rand::random::<u32>();
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        let docker = docker.clone();
        set.spawn(async move {
            let volume = format!("gantry-rawbench-{tag}-{i}");
            docker.create_volume(VolumeCreateRequest { name: Some(volume.clone()), ..Default::default() }).await?;
            let body = ContainerCreateBody {
                image: Some("gantry/devbox:latest".into()),
                host_config: Some(HostConfig {
                    network_mode: Some("none".into()),
                    binds: Some(vec![format!("{volume}:/data")]),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let name = format!("gantry-rawbench-{tag}-{i}");
            let c = docker
                .create_container(Some(CreateContainerOptions { name: Some(name), ..Default::default() }), body)
                .await?;
            docker.start_container(&c.id, None::<StartContainerOptions>).await?;
            Ok::<_, bollard::errors::Error>((c.id, volume))
        });
    }
    let mut made = Vec::new();
    while let Some(r) = set.join_next().await {
        made.push(r.map_err(|e| PlatformError::Internal(e.to_string()))?.map_err(err)?);
    }
    let secs = started.elapsed().as_secs_f64();
    for (id, volume) in made {
        let _ = docker.remove_container(&id, Some(RemoveContainerOptions { force: true, ..Default::default() })).await;
        let _ = docker.remove_volume(&volume, None::<bollard::query_parameters::RemoveVolumeOptions>).await;
    }
    Ok(secs)
}
