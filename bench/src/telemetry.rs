//! `gantry-bench telemetry`: figures for GPU telemetry on 1,000 GPUs (125
//! nodes × 8) with 7 days of history at 10 s samples (prints, asserts
//! nothing). The newest `--raw-hours` go through the real ingest path
//! (`insert_samples`, 10 passes per batch as the writer coalesces them, and
//! the ten-minute `move_settled` into the table keyed by GPU) and
//! the real roll-up; the older part is written straight into the rollup
//! tables (1-minute for the last 24 h, 1-hour for all 7 days) because
//! ingesting 60 million samples would take ten minutes and prove nothing
//! more. Then: a 7-day (and 24 h, 1 h) chart of one 8-GPU node, the cluster
//! overview, and bytes per GPU-day of each table (SQLite's dbstat).

use clap::Args;
use gantry_core::telemetry::{simulate, ChartRange, SimPattern, HOUR_MS, MINUTE_MS};
use gantry_platform::{
    accounts,
    cluster::{self, NodeRegistration},
    db::{self, Pool},
    gpus::{self, SimulatedGpus},
    images,
    telemetry::{self, overview, query, rollup, store, GpuSample},
    PlatformError,
};
use std::time::Instant;

#[derive(Debug, Clone, Args)]
pub struct TelemetryBenchArgs {
    /// Hours of raw samples ingested through the real path (the rest of the 7 days is written as rollups).
    #[arg(long, default_value_t = 24)]
    pub raw_hours: i64,
}

const NODES: usize = 125;
const GPUS_PER_NODE: u32 = 8;
const STEP_MS: i64 = 10_000;

fn internal(e: impl std::fmt::Display) -> PlatformError {
    PlatformError::Internal(e.to_string())
}

pub async fn run(args: TelemetryBenchArgs) -> Result<(), PlatformError> {
    let raw_hours = args.raw_hours.clamp(1, 24);
    let tmp = tempfile::tempdir().map_err(internal)?;
    let pool = db::connect_file(&tmp.path().join("bench.db")).await?;
    db::migrate(&pool).await?;
    let setup = Instant::now();
    let gpus = setup_cluster(&pool).await?;
    println!(
        "setup: {NODES} nodes x {GPUS_PER_NODE} GPUs = {} GPUs, 3/4 held by 10 groups' machines ({:.1} s)",
        gpus.len(),
        setup.elapsed().as_secs_f64()
    );

    let now = telemetry::now_ms().div_euclid(HOUR_MS) * HOUR_MS;
    let raw_from = now - raw_hours * HOUR_MS;
    let ingest = ingest(&pool, &gpus, raw_from, now).await?;
    println!(
        "ingest: {} samples ({raw_hours} h x {} GPUs at 10 s) in {:.1} s through insert_samples and move_settled = {:.0} samples/s",
        ingest.0,
        gpus.len(),
        ingest.1,
        ingest.0 as f64 / ingest.1
    );
    let started = Instant::now();
    let rows = rollup::roll_up_range(&pool, raw_from, now).await?;
    println!(
        "roll-up of those {raw_hours} h: {rows} minute rows (and their hours) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let (minutes, hours) = older_rollups(&pool, raw_from, now).await?;
    println!("older history written as rollups: {minutes} minute rows (24 h - {raw_hours} h), {hours} hour rows (7 d - {raw_hours} h) in {:.1} s", started.elapsed().as_secs_f64());

    // Charts of one 8-GPU node: median of 21 runs each.
    let node_id: i64 = sqlx::query_scalar("SELECT MIN(id) FROM nodes").fetch_one(&pool).await?;
    for range in [ChartRange::Week, ChartRange::Day, ChartRange::Hour] {
        let ms =
            median_ms(21, || async { query::chart(&pool, query::Scope::Node(node_id), range, now).await.map(|_| ()) })
                .await?;
        let chart = query::chart(&pool, query::Scope::Node(node_id), range, now).await?;
        let points: usize = chart.series.iter().map(|s| s.points.len()).sum();
        println!("chart of one 8-GPU node over {}: {ms:.2} ms median ({points} points)", range.as_str());
    }
    for period in ["24h", "7d"] {
        let period_ms = gantry_core::telemetry::usage_period_ms(period).unwrap_or(HOUR_MS);
        let ms = median_ms(21, || async {
            overview::heatmap(&pool, now).await?;
            overview::held_vs_used(&pool, period_ms, now).await?;
            Ok(())
        })
        .await?;
        println!("cluster overview (heatmap of {} GPUs + held vs used over {period}): {ms:.2} ms median", gpus.len());
    }
    storage(&pool, gpus.len() as f64, raw_hours).await
}

/// The GPUs: (id, node, holder, pattern).
type Gpu = (i64, i64, Option<i64>, Option<SimPattern>);

async fn setup_cluster(pool: &Pool) -> Result<Vec<Gpu>, PlatformError> {
    for n in 0..NODES {
        let name = format!("n{n:03}");
        let found =
            gpus::simulated(&name, &SimulatedGpus { count: GPUS_PER_NODE, model: "A100".into(), memory_mb: 81_920 });
        let endpoint = format!("simulated://{name}");
        let reg = NodeRegistration {
            name: &name,
            region_code: "local",
            docker_endpoint: &endpoint,
            volume_dir: "",
            executor: "simulated",
            cpu_count: 64,
            memory_mb: 512_000,
            gpus: &found,
        };
        cluster::register_node(pool, reg).await?;
    }
    images::ensure_default_image(pool, "devbox", "gantry/devbox:latest", "bench").await?;
    for g in 0..10 {
        let group = format!("team{g}");
        accounts::create_group(pool, None, &group, 1000).await?;
        let new = accounts::NewUser {
            username: &format!("u{g}"),
            password: "bench-password",
            role: gantry_core::Role::User,
            group: Some(&group),
        };
        accounts::create_user(pool, None, new).await?;
    }
    // Machines of 2 GPUs on the first 6 GPUs of every node (3/4 held),
    // owned in turn by the ten users, in turn idle/training/notebook/hot.
    let node_gpus: Vec<(i64, i64, i64)> =
        sqlx::query_as("SELECT id, node_id, idx FROM gpus ORDER BY node_id, idx").fetch_all(pool).await?;
    let mut out = Vec::with_capacity(node_gpus.len());
    let mut tx = pool.begin().await?;
    let mut machine = None;
    for (i, (gpu, node, idx)) in node_gpus.into_iter().enumerate() {
        if idx < 6 && idx % 2 == 0 {
            let pattern = SimPattern::ALL[(i / 2) % 4];
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb, state, created_at, updated_at, sim_pattern) \
                 SELECT ?, id, group_id, (SELECT MIN(id) FROM images), 2, 'A100', ?, ?, 10, 'running', 0, 0, ? FROM users WHERE username = ? RETURNING id",
            )
            .bind(format!("m{i}"))
            .bind(node)
            .bind(format!("vol-m{i}"))
            .bind(pattern.as_str())
            .bind(format!("u{}", (i / 2) % 10))
            .fetch_one(&mut *tx)
            .await?;
            machine = Some((id, pattern));
        }
        let held = if idx < 6 { machine } else { None };
        if let Some((m, _)) = held {
            sqlx::query("INSERT INTO machine_gpus (gpu_id, machine_id) VALUES (?, ?)")
                .bind(gpu)
                .bind(m)
                .execute(&mut *tx)
                .await?;
        }
        out.push((gpu, node, held.map(|h| h.0), held.map(|h| h.1)));
    }
    tx.commit().await?;
    Ok(out)
}

/// Inserts `[from, to)` at 10 s for every GPU, ten passes per batch;
/// returns (samples, seconds spent inside insert_samples and move_settled).
async fn ingest(pool: &Pool, gpus: &[Gpu], from: i64, to: i64) -> Result<(usize, f64), PlatformError> {
    let (mut total, mut secs) = (0, 0.0);
    let mut at = from;
    while at < to {
        let mut batch = Vec::with_capacity(gpus.len() * 10);
        for pass in 0..10 {
            let t = at + pass * STEP_MS;
            if t >= to {
                break;
            }
            for &(gpu_id, node_id, machine_id, pattern) in gpus {
                let r = simulate(pattern, gpu_id, t, 81_920);
                batch.push(GpuSample {
                    gpu_id,
                    at_ms: t,
                    node_id,
                    machine_id,
                    util_pct: r.util_pct,
                    mem_used_mb: r.mem_used_mb,
                    mem_total_mb: 81_920,
                    temp_c: r.temp_c,
                    power_w: r.power_w,
                    throttled: r.throttled,
                });
            }
        }
        let started = Instant::now();
        telemetry::insert_samples(pool, &batch).await?;
        at += 10 * STEP_MS;
        // As the server does after each pass: settled ten-minute spans move into
        // the table keyed by GPU; that cost is part of ingesting.
        store::move_settled(pool, store::settle_before(at)).await?;
        secs += started.elapsed().as_secs_f64();
        total += batch.len();
    }
    Ok((total, secs))
}

/// Minute rows for `[now - 24 h, raw_from)` and hour rows for
/// `[now - 7 d, raw_from)`, with varied values, as the roll-up would have
/// left them.
async fn older_rollups(pool: &Pool, raw_from: i64, now: i64) -> Result<(u64, u64), PlatformError> {
    let insert = |table: &'static str, step: i64, samples: i64, minutes: i64, from: i64| async move {
        if from >= raw_from {
            return Ok(0);
        }
        let sql = format!(
            "WITH RECURSIVE b(ms) AS (SELECT ?1 UNION ALL SELECT ms + ?2 FROM b WHERE ms + ?2 < ?3) \
             INSERT INTO {table} (gpu_id, bucket_ms, machine_id, node_id, samples, minutes, util_mean, util_max, mem_mean, mem_max, mem_total, temp_mean, temp_max, power_mean, power_max) \
             SELECT g.id, b.ms, COALESCE(mg.machine_id, 0), g.node_id, ?4, ?5, \
                    ((g.id * 37 + b.ms / ?2 * 11) % 1000) / 10.0, ((g.id * 37 + b.ms / ?2 * 11) % 1000) / 10.0 + 3, \
                    (g.id * 131 + b.ms / ?2) % 81920 * 1.0, (g.id * 131 + b.ms / ?2) % 81920, 81920, 40.5, 52, 150.5, 210 \
             FROM gpus g CROSS JOIN b LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id"
        );
        let rows = sqlx::query(&sql)
            .bind(from)
            .bind(step)
            .bind(raw_from)
            .bind(samples)
            .bind(minutes)
            .execute(pool)
            .await?
            .rows_affected();
        Ok::<u64, PlatformError>(rows)
    };
    let minutes = insert("gpu_rollup_1m", MINUTE_MS, 6, 1, now - 24 * HOUR_MS).await?;
    let hours = insert("gpu_rollup_1h", HOUR_MS, 360, 60, now - 7 * 24 * HOUR_MS).await?;
    Ok((minutes, hours))
}

async fn median_ms<F, Fut>(runs: usize, mut f: F) -> Result<f64, PlatformError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), PlatformError>>,
{
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        f().await?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[runs / 2])
}

/// Bytes per GPU-day of each resolution (tables and their indexes, from
/// dbstat), and what the default retentions keep for 1,000 GPUs.
async fn storage(pool: &Pool, gpus: f64, raw_hours: i64) -> Result<(), PlatformError> {
    let bytes = |names: &'static str| async move {
        let sql = format!("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN ({names})");
        sqlx::query_scalar::<_, i64>(&sql).fetch_one(pool).await.map(|b| b as f64)
    };
    let raw = bytes("'gpu_samples', 'gpu_samples_recent'").await? / (gpus * raw_hours as f64 / 24.0);
    let minute = bytes("'gpu_rollup_1m', 'gpu_rollup_1m_machine'").await? / gpus;
    let hour = bytes("'gpu_rollup_1h', 'gpu_rollup_1h_machine'").await? / (gpus * 7.0);
    let keep = telemetry::TelemetryConfig::default().keep;
    let days = |ms: i64| ms as f64 / (24 * HOUR_MS) as f64;
    let per_gpu = raw * days(keep.raw_ms) + minute * days(keep.minute_ms) + hour * days(keep.hour_ms);
    let file = std::fs::metadata(pool.connect_options().get_filename()).map(|m| m.len()).unwrap_or(0);
    println!("bytes per GPU-day: raw samples {raw:.0} ({:.1} B/sample), 1-minute rollups {minute:.0}, 1-hour rollups {hour:.0}", raw / 8640.0);
    println!(
        "kept with the default retentions (raw {:.0} d, 1-minute {:.0} d, 1-hour {:.0} d): {:.1} MB per GPU, {:.2} GB for 1,000 GPUs (bench file: {:.0} MB)",
        days(keep.raw_ms),
        days(keep.minute_ms),
        days(keep.hour_ms),
        per_gpu / 1e6,
        per_gpu * 1000.0 / 1e9,
        file as f64 / 1e6
    );
    Ok(())
}
