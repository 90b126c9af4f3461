//! Telemetry storage against a real SQLite file with the real migrations:
//! batched inserts, window reads, rollups, pruning and attribution.

use gantry_testkit::install::Install;
use gantry_testkit::telemetry::fixture;

use gantry_core::telemetry::{Retention, HOUR_MS, MINUTE_MS};
use gantry_platform::{
    db,
    telemetry::{self, rollup, store, GpuSample},
};
use std::collections::BTreeMap;

/// Raw samples stored, settled and recent.
async fn raw_count(pool: &db::Pool) -> i64 {
    sqlx::query_scalar("SELECT (SELECT COUNT(*) FROM gpu_samples) + (SELECT COUNT(*) FROM gpu_samples_recent)")
        .fetch_one(pool)
        .await
        .unwrap()
}

fn sample(gpu_id: i64, at_ms: i64, machine_id: Option<i64>, util: f64) -> GpuSample {
    GpuSample {
        gpu_id,
        at_ms,
        node_id: 1,
        machine_id,
        util_pct: util,
        mem_used_mb: (util * 800.0) as i64,
        mem_total_mb: 81_920,
        temp_c: 30.0 + util / 2.0,
        power_w: 60.0 + util * 3.0,
        throttled: util > 95.0,
    }
}

gantry_testkit::timed_test! {
    async fn inserted_samples_read_back_ordered_by_gpu_then_time() {
        let Install { dir: _dir, pool } = Install::new().await;
        // More rows than one INSERT statement carries, out of order.
        let mut samples: Vec<GpuSample> = (0..1000).map(|i| sample(1 + i % 3, (i / 3) * 10_000, Some(7), (i % 100) as f64)).collect();
        samples.reverse();
        telemetry::insert_samples(&pool, &samples).await.unwrap();
        let window = telemetry::gpu_window(&pool, &[2, 1], 0, 100_000).await.unwrap();
        // GPUs 1 and 2, at 0..=100 s every 10 s: 11 each.
        assert_eq!(window.len(), 22);
        assert!(window[..11].iter().all(|s| s.gpu_id == 1) && window[11..].iter().all(|s| s.gpu_id == 2));
        assert!(window[..11].windows(2).all(|w| w[0].at_ms < w[1].at_ms));
        let original = samples.iter().find(|s| s.gpu_id == 2 && s.at_ms == 50_000).unwrap();
        assert_eq!(window.iter().find(|s| s.gpu_id == 2 && s.at_ms == 50_000).unwrap(), original);
        // A retried batch replaces instead of failing.
        telemetry::insert_samples(&pool, &samples[..10]).await.unwrap();
        assert_eq!(raw_count(&pool).await, 1000);
    }
}

gantry_testkit::timed_test! {
    async fn a_batch_with_an_invalid_sample_writes_nothing() {
        let Install { dir: _dir, pool } = Install::new().await;
        let mut batch = vec![sample(1, 0, None, 10.0), sample(1, 10_000, None, 20.0)];
        batch.push(GpuSample { util_pct: f64::NAN, ..sample(1, 20_000, None, 0.0) });
        let err = telemetry::insert_samples(&pool, &batch).await.unwrap_err();
        assert!(err.to_string().contains("invalid sample for GPU #1"), "{err}");
        batch[2].util_pct = 140.0;
        assert!(telemetry::insert_samples(&pool, &batch).await.is_err());
        assert_eq!(raw_count(&pool).await, 0);
    }
}

/// Hour-aligned start of the synthetic series.
const T0: i64 = 1_700_002_800_000;

/// A varied, reproducible series: 2.5 h of 10 s samples on two GPUs; the
/// first changes hands from machine `a` to `b` at 75 minutes.
fn series(gpus: &[i64], a: i64, b: i64) -> Vec<GpuSample> {
    let mut out = Vec::new();
    for step in 0..(150 * 6) {
        let at = T0 + step * 10_000;
        for (k, &g) in gpus.iter().enumerate() {
            let machine = if k == 0 { Some(if step < 75 * 6 { a } else { b }) } else { None };
            let util = ((step * 37 + k as i64 * 11) % 101) as f64;
            out.push(GpuSample {
                mem_used_mb: (step * 131) % 81_920,
                temp_c: 30.0 + (step % 50) as f64,
                ..sample(g, at, machine, util)
            });
        }
    }
    out
}

#[derive(Debug, Default)]
struct Agg {
    n: i64,
    util_sum: f64,
    util_max: f64,
    mem_max: i64,
    temp_max: f64,
}

fn aggregate(samples: &[GpuSample], bucket: i64) -> BTreeMap<(i64, i64, i64), Agg> {
    let mut out: BTreeMap<(i64, i64, i64), Agg> = BTreeMap::new();
    for s in samples {
        let a = out.entry((s.gpu_id, s.at_ms / bucket * bucket, s.machine_id.unwrap_or(0))).or_default();
        a.n += 1;
        a.util_sum += s.util_pct;
        a.util_max = a.util_max.max(s.util_pct);
        a.mem_max = a.mem_max.max(s.mem_used_mb);
        a.temp_max = a.temp_max.max(s.temp_c);
    }
    out
}

async fn assert_rollup_matches(pool: &db::Pool, table: &str, expected: &BTreeMap<(i64, i64, i64), Agg>) {
    let sql = format!("SELECT gpu_id, bucket_ms, machine_id, samples, util_mean, util_max, mem_max, temp_max FROM {table} ORDER BY 1, 2, 3");
    let rows: Vec<(i64, i64, i64, i64, f64, f64, i64, f64)> = sqlx::query_as(&sql).fetch_all(pool).await.unwrap();
    assert_eq!(rows.len(), expected.len(), "{table}: row count");
    for (row, (key, agg)) in rows.iter().zip(expected) {
        assert_eq!((row.0, row.1, row.2), *key, "{table}");
        assert_eq!(row.3, agg.n, "{table} {key:?}: samples");
        assert!(
            (row.4 - agg.util_sum / agg.n as f64).abs() < 1e-9,
            "{table} {key:?}: mean {} vs {}",
            row.4,
            agg.util_sum / agg.n as f64
        );
        assert_eq!((row.5, row.6, row.7), (agg.util_max, agg.mem_max, agg.temp_max), "{table} {key:?}: maxima");
    }
}

gantry_testkit::timed_test! {
    async fn rollups_equal_the_aggregates_of_the_raw_samples_however_they_are_stepped() {
        let f = fixture(2).await;
        let (a, b) = (f.machine("a", "running", &[], None).await, f.machine("b", "running", &[], None).await);
        let samples = series(&f.gpu_ids, a, b);
        telemetry::insert_samples(&f.pool, &samples).await.unwrap();
        // Rolled up in uneven steps, as passes would: partial hours are
        // rewritten as their minutes arrive.
        let mut at = T0;
        for step in [37, 1, 59, 23, 30] {
            rollup::roll_up_range(&f.pool, at, at + step * MINUTE_MS).await.unwrap();
            at += step * MINUTE_MS;
        }
        assert_eq!(at, T0 + 150 * MINUTE_MS);
        assert_rollup_matches(&f.pool, "gpu_rollup_1m", &aggregate(&samples, MINUTE_MS)).await;
        assert_rollup_matches(&f.pool, "gpu_rollup_1h", &aggregate(&samples, HOUR_MS)).await;
        // Attribution: the hour in which GPU 1 changed hands has a row for
        // each holder, and the held minutes add up to the whole hour.
        let g = f.gpu_ids[0];
        let split: Vec<(i64, i64)> = sqlx::query_as("SELECT machine_id, minutes FROM gpu_rollup_1h WHERE gpu_id = ? AND bucket_ms = ? ORDER BY machine_id")
            .bind(g)
            .bind(T0 + HOUR_MS)
            .fetch_all(&f.pool)
            .await
            .unwrap();
        assert_eq!(split, vec![(a, 15), (b, 45)]);
    }
}

gantry_testkit::timed_test! {
    async fn attribution_survives_the_gpu_moving_to_another_machine_and_deletion() {
        let f = fixture(2).await;
        let g = f.gpu_ids[0];
        let a = f.machine("a", "running", &[g], Some("hot")).await;
        telemetry::sample_once(&f.pool, T0).await.unwrap();
        f.release(&[g]).await;
        sqlx::query("UPDATE machines SET state = 'deleted' WHERE id = ?").bind(a).execute(&f.pool).await.unwrap();
        let b = f.machine("b", "running", &[g], Some("idle")).await;
        telemetry::sample_once(&f.pool, T0 + 10_000).await.unwrap();
        let window = telemetry::gpu_window(&f.pool, &[g], T0, T0 + 10_000).await.unwrap();
        let holders: Vec<Option<i64>> = window.iter().map(|s| s.machine_id).collect();
        assert_eq!(holders, vec![Some(a), Some(b)]);
        // Each kept its own pattern's reading.
        assert!(window[0].util_pct >= 90.0 && window[1].util_pct < 5.0, "{window:?}");
        rollup::roll_up_range(&f.pool, T0, T0 + MINUTE_MS).await.unwrap();
        let a_rows = f.count(&format!("SELECT COUNT(*) FROM gpu_rollup_1m WHERE machine_id = {a}")).await;
        assert_eq!(a_rows, 1);
    }
}

gantry_testkit::timed_test! {
    async fn pruning_keeps_each_resolution_for_its_retention_and_never_drops_unrolled_samples() {
        let f = fixture(2).await;
        let samples = series(&f.gpu_ids, 1, 2);
        telemetry::insert_samples(&f.pool, &samples).await.unwrap();
        let now = T0 + 150 * MINUTE_MS;
        let keep = Retention { raw_ms: 30 * MINUTE_MS, minute_ms: HOUR_MS, hour_ms: 2 * HOUR_MS };
        // Settled into the table keyed by GPU, as the server does.
        store::move_settled(&f.pool, now).await.unwrap();
        // Nothing rolled up yet: nothing raw may go, whatever its age.
        let pruned = rollup::prune(&f.pool, now, keep).await.unwrap();
        assert_eq!(pruned.raw, 0);
        assert_eq!(f.count("SELECT COUNT(*) FROM gpu_samples").await, samples.len() as i64);
        // Roll everything up and record it, as passes would have.
        rollup::roll_up_range(&f.pool, T0, now).await.unwrap();
        sqlx::query("UPDATE telemetry_state SET rolled_to_ms = ?").bind(now).execute(&f.pool).await.unwrap();
        let pruned = rollup::prune(&f.pool, now, keep).await.unwrap();
        assert_eq!(pruned.raw, 2 * 120 * 6, "two GPUs, 120 minutes older than 30 minutes");
        assert_eq!(f.count("SELECT MIN(at_ms) FROM gpu_samples").await, now - 30 * MINUTE_MS);
        assert_eq!(f.count("SELECT MIN(bucket_ms) FROM gpu_rollup_1m").await, now - HOUR_MS);
        assert_eq!(pruned.minutes, 2 * 90, "90 minutes per GPU (the change of holder falls on a minute boundary)");
        // Hours starting before now - 2 h: only T0's hour.
        assert_eq!(f.count("SELECT MIN(bucket_ms) FROM gpu_rollup_1h").await, T0 + HOUR_MS);
        // Pruning again removes nothing more.
        assert_eq!(rollup::prune(&f.pool, now, keep).await.unwrap(), rollup::Pruned::default());
    }
}

gantry_testkit::timed_test! {
    async fn roll_up_resumes_where_it_stopped_and_leaves_the_open_minute() {
        let f = fixture(1).await;
        telemetry::insert_samples(&f.pool, &series(&f.gpu_ids, 1, 2)[..60]).await.unwrap();
        // 60 samples = 10 minutes from T0. At T0 + 5 min 40 s, minutes 0..5
        // are closed and past the lag.
        let now = T0 + 5 * MINUTE_MS + 40_000;
        assert_eq!(rollup::roll_up(&f.pool, now, HOUR_MS).await.unwrap(), 5);
        assert_eq!(f.count("SELECT rolled_to_ms FROM telemetry_state").await, T0 + 5 * MINUTE_MS);
        // 20 s into a minute: the one just closed is within the lag, not rolled.
        assert_eq!(rollup::roll_up(&f.pool, T0 + 6 * MINUTE_MS + 20_000, HOUR_MS).await.unwrap(), 0);
        assert_eq!(rollup::roll_up(&f.pool, T0 + 11 * MINUTE_MS, HOUR_MS).await.unwrap(), 5);
        assert_eq!(f.count("SELECT COUNT(*) FROM gpu_rollup_1m").await, 10);
        assert_eq!(f.count("SELECT SUM(minutes) FROM gpu_rollup_1h").await, 10);
    }
}

gantry_testkit::timed_test! {
    async fn a_batch_committed_after_its_minutes_were_rolled_up_is_rolled_in() {
        let f = fixture(1).await;
        let gpu = f.gpu_ids[0];
        telemetry::insert_samples(&f.pool, &series(&f.gpu_ids, 1, 2)[..60]).await.unwrap();
        assert_eq!(rollup::roll_up(&f.pool, T0 + 5 * MINUTE_MS + 40_000, HOUR_MS).await.unwrap(), 5);
        let counted = |sql: String| {
            let pool = f.pool.clone();
            async move { sqlx::query_scalar::<_, i64>(&sql).fetch_one(&pool).await.unwrap() }
        };
        let minute = format!("SELECT SUM(samples) FROM gpu_rollup_1m WHERE gpu_id = {gpu} AND bucket_ms = {}", T0 + MINUTE_MS);
        let hour = format!("SELECT SUM(samples) FROM gpu_rollup_1h WHERE gpu_id = {gpu}");
        let (before_minute, before_hour) = (counted(minute.clone()).await, counted(hour.clone()).await);

        // A reading of minute 1 whose batch was committed only now, after
        // that minute was rolled up (between two of the series' samples).
        telemetry::insert_samples(&f.pool, &[sample(gpu, T0 + MINUTE_MS + 5_000, Some(1), 99.0)]).await.unwrap();
        assert_eq!(counted(minute).await, before_minute + 1, "the late sample is missing from its minute");
        assert_eq!(counted(hour).await, before_hour + 1, "the late sample is missing from its hour");
        // Pruning keeps nothing unrolled, and the next roll-up goes on as before.
        assert_eq!(rollup::roll_up(&f.pool, T0 + 11 * MINUTE_MS, HOUR_MS).await.unwrap(), 5);
        assert_eq!(f.count("SELECT COUNT(*) FROM gpu_rollup_1m").await, 10);
    }
}

gantry_testkit::timed_test! {
    async fn settled_samples_move_once_read_the_same_and_late_samples_replace_instead_of_doubling() {
        let f = fixture(2).await;
        let mut samples = series(&f.gpu_ids, 1, 2);
        telemetry::insert_samples(&f.pool, &samples).await.unwrap();
        let end = T0 + 150 * MINUTE_MS;
        let before = telemetry::gpu_window(&f.pool, &f.gpu_ids, T0, end).await.unwrap();
        assert_eq!(f.count("SELECT COUNT(*) FROM gpu_samples_recent").await, samples.len() as i64, "new samples go to the recent table");
        // The first hour moves; the same horizon again moves nothing.
        assert_eq!(store::move_settled(&f.pool, T0 + HOUR_MS).await.unwrap(), 2 * 60 * 6);
        assert_eq!(store::move_settled(&f.pool, T0 + HOUR_MS).await.unwrap(), 0);
        assert_eq!(store::move_settled(&f.pool, T0).await.unwrap(), 0, "the horizon never goes back");
        assert_eq!(f.count("SELECT COUNT(*) FROM gpu_samples").await, 2 * 60 * 6);
        assert_eq!(raw_count(&f.pool).await, samples.len() as i64);
        let after = telemetry::gpu_window(&f.pool, &f.gpu_ids, T0, end).await.unwrap();
        assert_eq!(after, before, "same samples, same order (GPU, then time) across both tables");
        // A late copy of a moved sample replaces it where it lives, and a
        // late copy of a recent one replaces it in the recent table.
        samples[0].util_pct = 99.0;
        let late = samples.len() - 1;
        samples[late].util_pct = 1.0;
        telemetry::insert_samples(&f.pool, &[samples[0].clone(), samples[late].clone()]).await.unwrap();
        assert_eq!(raw_count(&f.pool).await, samples.len() as i64);
        assert_eq!(f.count("SELECT COUNT(*) FROM gpu_samples").await, 2 * 60 * 6);
        let window = telemetry::gpu_window(&f.pool, &f.gpu_ids, T0, end).await.unwrap();
        assert_eq!(window.iter().find(|s| s.gpu_id == samples[0].gpu_id && s.at_ms == T0).unwrap().util_pct, 99.0);
        // Rollups over the whole period read both tables.
        rollup::roll_up_range(&f.pool, T0, end).await.unwrap();
        assert_rollup_matches(&f.pool, "gpu_rollup_1m", &aggregate(&samples, MINUTE_MS)).await;
        assert_rollup_matches(&f.pool, "gpu_rollup_1h", &aggregate(&samples, HOUR_MS)).await;
    }
}

gantry_testkit::timed_test! {
    async fn pruning_removes_the_history_of_deleted_gpus_too() {
        let f = fixture(2).await;
        let (gone, kept) = (f.gpu_ids[0], f.gpu_ids[1]);
        let samples = series(&f.gpu_ids, 1, 2);
        telemetry::insert_samples(&f.pool, &samples).await.unwrap();
        let end = T0 + 150 * MINUTE_MS;
        // The first hour is rolled up while the GPU is there; then its node
        // drops it (a replaced card, a removed node) and the rest settles.
        rollup::roll_up_range(&f.pool, T0, T0 + HOUR_MS).await.unwrap();
        sqlx::query("DELETE FROM gpus WHERE id = ?").bind(gone).execute(&f.pool).await.unwrap();
        store::move_settled(&f.pool, end).await.unwrap();
        rollup::roll_up_range(&f.pool, T0 + HOUR_MS, end).await.unwrap();
        sqlx::query("UPDATE telemetry_state SET rolled_to_ms = ?").bind(end).execute(&f.pool).await.unwrap();
        let rows = |table: &str, gpu: i64| format!("SELECT COUNT(*) FROM {table} WHERE gpu_id = {gpu}");
        for table in ["gpu_samples", "gpu_rollup_1m", "gpu_rollup_1h"] {
            assert!(f.count(&rows(table, gone)).await > 0, "{table}: the deleted GPU's history is there to prune");
        }
        // Its history is its own and stays attributed until it ages out...
        let keep = Retention { raw_ms: 30 * MINUTE_MS, minute_ms: HOUR_MS, hour_ms: 2 * HOUR_MS };
        rollup::prune(&f.pool, end, keep).await.unwrap();
        assert_eq!(f.count(&rows("gpu_samples", gone)).await, f.count(&rows("gpu_samples", kept)).await, "pruned like any GPU's");
        // ...and then goes, like every GPU's.
        let later = end + 400 * 24 * HOUR_MS;
        let pruned = rollup::prune(&f.pool, later, Retention { raw_ms: 24 * HOUR_MS, minute_ms: 8 * 24 * HOUR_MS, hour_ms: 400 * 24 * HOUR_MS }).await.unwrap();
        assert!(pruned.raw > 0 && pruned.minutes > 0 && pruned.hours > 0, "{pruned:?}");
        for table in ["gpu_samples", "gpu_rollup_1m", "gpu_rollup_1h"] {
            assert_eq!(f.count(&rows(table, gone)).await, 0, "{table}: the deleted GPU's rows outlived every retention");
            assert_eq!(f.count(&rows(table, kept)).await, 0, "{table}");
        }
    }
}
