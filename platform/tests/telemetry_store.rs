//! Telemetry storage against a real SQLite file with the real migrations:
//! batched inserts, window reads, rollups, pruning and attribution.

use gantry_platform::{
    db,
    telemetry::{self, GpuSample},
};

async fn fresh_db() -> (tempfile::TempDir, db::Pool) {
    let dir = tempfile::tempdir().unwrap();
    let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
    db::migrate(&pool).await.unwrap();
    (dir, pool)
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
        let (_dir, pool) = fresh_db().await;
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
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM gpu_samples").fetch_one(&pool).await.unwrap();
        assert_eq!(count, 1000);
    }
}

gantry_testkit::timed_test! {
    async fn a_batch_with_an_invalid_sample_writes_nothing() {
        let (_dir, pool) = fresh_db().await;
        let mut batch = vec![sample(1, 0, None, 10.0), sample(1, 10_000, None, 20.0)];
        batch.push(GpuSample { util_pct: f64::NAN, ..sample(1, 20_000, None, 0.0) });
        let err = telemetry::insert_samples(&pool, &batch).await.unwrap_err();
        assert!(err.to_string().contains("invalid sample for GPU #1"), "{err}");
        batch[2].util_pct = 140.0;
        assert!(telemetry::insert_samples(&pool, &batch).await.is_err());
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM gpu_samples").fetch_one(&pool).await.unwrap();
        assert_eq!(count, 0);
    }
}
