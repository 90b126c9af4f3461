//! `gantry-bench matching`: figures for compute-task matching (prints, asserts
//! nothing). (a) The pure decision — image set, resource set, intersection,
//! shuffle — over 100 regions × 100 nodes × 8 GPUs and 1,000 master images;
//! (b) the same cluster in SQLite with 10,000 queued tasks: one pass of the
//! matcher after a release (the queue is first come, first served per
//! group, so a pass decides each group's head).

use gantry_core::matching::{decide, Arch, MasterImage, NodeCapacity, RegionCapacity, RegionImage, TaskRequest};
use gantry_platform::{
    accounts, catalogue,
    cluster::{self, NodeRegistration},
    compute, db,
    gpus::{self, SimulatedGpus},
    machines::Admissions,
    PlatformError,
};
use std::{collections::BTreeMap, sync::Arc, time::Instant};

fn request(i: usize) -> TaskRequest {
    TaskRequest {
        framework: "PyTorch".into(),
        framework_version: format!("2.{}", i % 10),
        interpreter: "Python".into(),
        interpreter_version: "3.11".into(),
        gpus: 1 + (i % 4) as u32,
        gpu_model: i.is_multiple_of(3).then(|| "A100".to_string()),
        cpu_millis: 2000,
        memory_mb: 8192,
    }
}

fn cluster(regions: usize, nodes: usize, gpus: u32) -> (Vec<MasterImage>, Vec<RegionCapacity>) {
    let regions_v: Vec<RegionCapacity> = (0..regions)
        .map(|r| RegionCapacity {
            code: format!("r{r:03}"),
            nodes: (0..nodes)
                .map(|n| NodeCapacity {
                    name: format!("r{r}-n{n}"),
                    arch: if n % 10 == 0 { Arch::Arm64 } else { Arch::Amd64 },
                    free_gpus: BTreeMap::from([(
                        (if n % 2 == 0 { "A100" } else { "H100" }).to_string(),
                        ((r + n) % (gpus as usize + 1)) as u32,
                    )]),
                    free_cpu_millis: 64_000,
                    free_memory_mb: 512_000,
                })
                .collect(),
        })
        .collect();
    // 1,000 master images (10 framework versions × 100 variants), each in 3 regions.
    let catalogue = (0..1000)
        .map(|m| MasterImage {
            id: m as i64,
            name: format!("img{m}"),
            interpreter: "Python".into(),
            interpreter_version: if m % 100 < 90 { "3.11".into() } else { "3.12".into() },
            framework: "PyTorch".into(),
            framework_version: format!("2.{}", m % 10),
            region_images: (0..3)
                .map(|k| RegionImage {
                    id: (m * 3 + k) as i64,
                    region: format!("r{:03}", (m * 7 + k * 31) % regions),
                    reference: format!("img{m}:{k}"),
                    arch: Arch::Amd64,
                })
                .collect(),
        })
        .collect();
    (catalogue, regions_v)
}

pub async fn run() -> Result<(), PlatformError> {
    // (a) Pure decisions.
    let (catalogue, regions) = cluster(100, 100, 8);
    let n = 2000;
    let started = Instant::now();
    let mut placed = 0;
    for i in 0..n {
        if matches!(
            decide(&catalogue, &regions, &request(i), i as u64).outcome,
            gantry_core::matching::Outcome::Placed { .. }
        ) {
            placed += 1;
        }
    }
    let per = started.elapsed().as_secs_f64() / n as f64;
    println!("decision (100 regions x 100 nodes x 8 GPUs, 1,000 master images): {:.1} µs each, {:.0}/s ({placed} of {n} placed)", per * 1e6, 1.0 / per);

    // (b) The queue in SQLite after a release.
    let tmp = tempfile::tempdir().map_err(|e| PlatformError::Internal(e.to_string()))?;
    let pool = db::connect_file(&tmp.path().join("bench.db")).await?;
    db::migrate(&pool).await?;
    let admin = accounts::create_user(
        &pool,
        None,
        accounts::NewUser {
            username: "bench",
            password: "bench-password",
            role: gantry_core::Role::Admin,
            group: None,
        },
    )
    .await?;
    let setup = Instant::now();
    for r in 0..100 {
        catalogue::create_region(&pool, admin.id, &format!("region{r:02}"), &format!("Region {r}"), "").await?;
        for n in 0..100 {
            let name = format!("r{r}-n{n}");
            let gpus = gpus::simulated(&name, &SimulatedGpus { count: 8, model: "A100".into(), memory_mb: 0 });
            let endpoint = format!("simulated://{name}");
            let reg = NodeRegistration {
                name: &name,
                region_code: &format!("region{r:02}"),
                docker_endpoint: &endpoint,
                volume_dir: "",
                executor: "simulated",
                cpu_count: 64,
                memory_mb: 512_000,
                gpus: &gpus,
            };
            cluster::register_node(&pool, reg).await?;
        }
        let image = catalogue::create_region_image(
            &pool,
            admin.id,
            &format!("region{r:02}"),
            "bench/image:1",
            "amd64",
            "training",
        )
        .await?;
        let master = catalogue::create_master_image(
            &pool,
            admin.id,
            &catalogue::NewMasterImage {
                name: &format!("m{r}"),
                interpreter: "Python",
                interpreter_version: "3.11",
                framework: "PyTorch",
                framework_version: "2.4",
            },
        )
        .await?;
        catalogue::set_link(&pool, admin.id, master, image.id, true).await?;
    }
    sqlx::query("UPDATE nodes SET last_heartbeat = strftime('%s', 'now')").execute(&pool).await?;
    // 10,000 tasks in 100 groups, each asking for more GPUs than any node has: all wait.
    let mut users = Vec::new();
    for g in 0..100 {
        accounts::create_group(&pool, None, &format!("g{g:03}"), 1000).await?;
        users.push(
            accounts::create_user(
                &pool,
                None,
                accounts::NewUser {
                    username: &format!("u{g:03}"),
                    password: "bench-password",
                    role: gantry_core::Role::User,
                    group: Some(&format!("g{g:03}")),
                },
            )
            .await?,
        );
    }
    for i in 0..10_000 {
        let req = compute::SubmitCompute {
            name: format!("t{i}"),
            framework: "PyTorch".into(),
            framework_version: "2.4".into(),
            interpreter: "Python".into(),
            interpreter_version: "3.11".into(),
            command: compute::Command::Argv(vec!["true".into()]),
            gpu_count: 9,
            gpu_model: None,
            cpu_millis: 1000,
            memory_mb: 1024,
            time_limit_secs: 60,
            datasets: Vec::new(),
        };
        compute::record(&pool, &users[i % 100], &req).await?;
    }
    println!(
        "setup: 100 regions x 100 nodes x 8 GPUs, 10,000 queued tasks in 100 groups ({:.1} s)",
        setup.elapsed().as_secs_f64()
    );
    let admissions = Admissions::start(pool.clone(), Arc::new(tokio::sync::Notify::new()));
    let started = Instant::now();
    compute::evaluate_queue(&pool, &admissions).await?;
    println!(
        "queue pass after a release (100 group heads decided and recorded, 10,000 queued): {:.3} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
