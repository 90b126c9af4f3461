//! `gantry-bench docker`: dev machines created at once on the local Docker
//! Engine until running — with the volume pool (issue 35 part 4), without
//! it (each create formats its block volume), and the same work straight
//! through the Engine API (plain volume, create, start) — in the same run,
//! round after round, so the three share the machine's state. Prints
//! numbers (and how many volumes came from the pool); asserts nothing.

use crate::admissions::{request, setup, Setup};
use gantry_platform::{
    dispatch::Dispatcher,
    executor::{loopdev, DockerExecutor, Executor},
    fleet::Fleet,
    volume_pool::{self, PoolConfig},
    PlatformError,
};
use std::time::{Duration, Instant};

fn internal(e: impl std::fmt::Display) -> PlatformError {
    PlatformError::Internal(e.to_string())
}

pub async fn run(machines: usize, rounds: usize) -> Result<(), PlatformError> {
    let raw_exec = DockerExecutor::connect("").map_err(internal)?;
    raw_exec.ping().await.map_err(|e| internal(format!("{e}; run scripts/dockerd.sh")))?;
    if let Err(why) = loopdev::enabled() {
        println!("block volumes are off here ({why}): creates make plain volumes, and the pool changes nothing");
    }
    println!("{machines} machines at once, until running; {rounds} rounds (raw Engine API, Gantry without the pool, with it)");
    let (mut raw, mut without, mut with) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        raw.push(raw_engine(machines).await?);
        without.push(gantry(machines, false).await?);
        with.push(gantry(machines, true).await?);
        println!(
            "round {round}: raw Engine API {:.3} s | gantry without pool {:.3} s | gantry with pool {:.3} s",
            raw[round - 1],
            without[round - 1],
            with[round - 1]
        );
    }
    let (raw, without, with) = (median(raw), median(without), median(with));
    println!("raw Engine API: {machines} x (volume + create + start) at once: {raw:.3} s (median)");
    println!(
        "gantry without the volume pool (mkfs on each create): {without:.3} s (median), {:.2}x raw",
        without / raw
    );
    println!("gantry with the volume pool (pre-formatted images): {with:.3} s (median), {:.2}x raw", with / raw);
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One burst through the admission path and the dispatcher, as `gantry
/// serve` runs them; with `pool`, the pool holds an image per machine
/// before the clock starts. Its refill loop (as serve runs it) waits for
/// the burst to pass, so it is started after it here and timed on its own.
async fn gantry(machines: usize, pool: bool) -> Result<f64, PlatformError> {
    let s = setup(1, machines as u32, "docker", machines as i64).await?;
    let volume_dir = s.dir.path().join("volumes");
    let cfg = PoolConfig {
        volume_dir: volume_dir.clone(),
        classes: vec![request(&s, 0).volume_size_gb],
        per_class: if pool { machines } else { 0 },
        budget_bytes: 64 << 30,
    };
    let fill = |cfg: PoolConfig| async move {
        tokio::task::spawn_blocking(move || volume_pool::fill(&cfg)).await.map_err(internal)?.map_err(internal)
    };
    fill(cfg.clone()).await?;
    let pooled = uuids(volume_pool::images(&volume_dir).into_iter().map(|i| i.path).collect()).await?;
    let fleet = Fleet::new();
    let dispatcher = Dispatcher::new(s.pool.clone(), fleet.clone(), s.wake.clone(), machines);
    let dispatching = tokio::spawn(dispatcher.run());
    let secs = burst(&s, machines).await?;
    dispatching.abort();
    let running: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM machines WHERE state = 'running'").fetch_one(&s.pool).await?;
    let enforced: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM machines WHERE volume_enforced = 1").fetch_one(&s.pool).await?;
    if running != machines as i64 || enforced != machines as i64 {
        println!("  (gantry: only {running} running, {enforced} with size-enforced volumes)");
    }
    if pool {
        let names: Vec<String> = sqlx::query_scalar("SELECT volume_name FROM machines").fetch_all(&s.pool).await?;
        let used = uuids(names.iter().map(|n| loopdev::image_path(&volume_dir, n)).collect()).await?;
        let from_pool = used.iter().filter(|u| pooled.contains(u)).count();
        let started = Instant::now();
        let made = fill(cfg).await?;
        println!(
            "  pool: {} images ready before; {from_pool} of {machines} volumes were pool images (no mkfs); refilling {made} took {:.3} s after",
            pooled.len(),
            started.elapsed().as_secs_f64()
        );
    }
    clean_up(&s, &fleet).await?;
    Ok(secs)
}

/// The ext4 UUIDs of image files (`blkid`).
async fn uuids(images: Vec<std::path::PathBuf>) -> Result<Vec<String>, PlatformError> {
    tokio::task::spawn_blocking(move || {
        images
            .iter()
            .map(|i| {
                let out =
                    std::process::Command::new("blkid").args(["-s", "UUID", "-o", "value", "--"]).arg(i).output()?;
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
            })
            .collect::<std::io::Result<Vec<String>>>()
    })
    .await
    .map_err(internal)?
    .map_err(internal)
}

/// Creates at once, then waits for the dispatcher by watching the task table.
async fn burst(s: &Setup, machines: usize) -> Result<f64, PlatformError> {
    let started = Instant::now();
    let mut handles = Vec::new();
    for i in 0..machines {
        let (adm, req) = (s.admissions.clone(), request(s, i));
        handles.push(tokio::spawn(async move { adm.create(req).await }));
    }
    for h in handles {
        h.await.map_err(internal)??;
    }
    loop {
        let open: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE state NOT IN ('succeeded', 'failed', 'cancelled')")
                .fetch_one(&s.pool)
                .await?;
        if open == 0 {
            return Ok(started.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Containers, volumes and their loop devices, as a delete would.
async fn clean_up(s: &Setup, fleet: &Fleet) -> Result<(), PlatformError> {
    let exec: Executor = fleet.executor(&s.pool, 1).await?;
    let instance = gantry_platform::machines::instance_id(&s.pool).await?;
    for c in exec.list_managed(&instance).await.map_err(internal)? {
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
    let docker = Docker::connect_with_defaults().map_err(internal)?.negotiate_version().await.map_err(internal)?;
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
        made.push(r.map_err(internal)?.map_err(internal)?);
    }
    let secs = started.elapsed().as_secs_f64();
    for (id, volume) in made {
        let _ = docker.remove_container(&id, Some(RemoveContainerOptions { force: true, ..Default::default() })).await;
        let _ = docker.remove_volume(&volume, None::<bollard::query_parameters::RemoveVolumeOptions>).await;
    }
    Ok(secs)
}
