//! The sampler with the simulated source, the chart and overview queries,
//! and the admin's pattern setting, against a real SQLite file.

use gantry_testkit::telemetry::fixture;

use gantry_core::telemetry::{simulate, view::HeatCell, ChartRange, Resolution, SimPattern, HOUR_MS, MINUTE_MS};
use gantry_platform::telemetry::{self, overview, query, rollup, store};

const T0: i64 = 1_700_002_800_000;

gantry_testkit::timed_test! {
    async fn a_pass_reads_every_gpu_with_its_holders_pattern_and_free_gpus_read_idle() {
        let f = fixture(4).await;
        let g = &f.gpu_ids;
        let hot = f.machine("hot", "running", &g[0..2], Some("hot")).await;
        let stopped = f.machine("stopped", "stopped", &g[2..3], Some("training")).await;
        assert_eq!(telemetry::sample_once(&f.pool, T0).await.unwrap(), 4);
        let rows: Vec<(i64, Option<i64>, f64, i64, f64, String)> =
            sqlx::query_as("SELECT gpu_id, machine_id, util_pct, mem_used_mb, temp_c, source FROM gpu_latest ORDER BY gpu_id").fetch_all(&f.pool).await.unwrap();
        let expect = [(Some(hot), Some(SimPattern::Hot)), (Some(hot), Some(SimPattern::Hot)), (Some(stopped), None), (None, None)];
        for (row, (machine, pattern)) in rows.iter().zip(expect) {
            let want = simulate(pattern, row.0, T0, 81_920);
            assert_eq!((row.1, row.2, row.3, row.4), (machine, want.util_pct, want.mem_used_mb, want.temp_c), "GPU #{}", row.0);
            assert_eq!(row.5, "simulated");
        }
        // The same pass stored the samples, attributed the same way.
        let window = telemetry::gpu_window(&f.pool, g, T0, T0).await.unwrap();
        assert_eq!(window.iter().map(|s| s.machine_id).collect::<Vec<_>>(), vec![Some(hot), Some(hot), Some(stopped), None]);
        assert!(window.iter().all(|s| s.node_id == f.node_id));
        // A node marked lost is not sampled.
        sqlx::query("UPDATE nodes SET state = 'lost'").execute(&f.pool).await.unwrap();
        assert_eq!(telemetry::sample_once(&f.pool, T0 + 10_000).await.unwrap(), 0);
    }
}

gantry_testkit::timed_test! {
    async fn an_admin_sets_a_machines_pattern_and_bad_patterns_change_nothing() {
        let f = fixture(1).await;
        let m = f.machine("m", "running", &f.gpu_ids, None).await;
        let err = overview::set_sim_pattern(&f.pool, f.user_id, m, Some("melting")).await.unwrap_err();
        assert!(err.to_string().contains("unknown simulated pattern \"melting\""), "{err}");
        assert!(overview::set_sim_pattern(&f.pool, f.user_id, 9_999, Some("hot")).await.is_err());
        assert_eq!(f.count("SELECT COUNT(*) FROM audit_log WHERE action = 'machine.sim_pattern'").await, 0);
        // Unset: notebook.
        telemetry::sample_once(&f.pool, T0).await.unwrap();
        overview::set_sim_pattern(&f.pool, f.user_id, m, Some("training")).await.unwrap();
        telemetry::sample_once(&f.pool, T0 + 10_000).await.unwrap();
        let w = telemetry::gpu_window(&f.pool, &f.gpu_ids, T0, T0 + 10_000).await.unwrap();
        let gpu = f.gpu_ids[0];
        assert_eq!(w[0].util_pct, simulate(Some(SimPattern::Notebook), gpu, T0, 81_920).util_pct);
        assert_eq!(w[1].util_pct, simulate(Some(SimPattern::Training), gpu, T0 + 10_000, 81_920).util_pct);
        assert_eq!(f.count("SELECT COUNT(*) FROM audit_log WHERE action = 'machine.sim_pattern'").await, 1);
    }
}

gantry_testkit::timed_test! {
    async fn charts_read_raw_for_an_hour_and_rollups_beyond_and_overview_counts_gpu_hours() {
        let f = fixture(3).await;
        let m = f.machine("train", "running", &f.gpu_ids[0..2], Some("training")).await;
        // Two hours of passes every 10 s.
        for step in 0..(2 * 360) {
            telemetry::sample_once(&f.pool, T0 + step * 10_000).await.unwrap();
        }
        let now = T0 + 2 * HOUR_MS;
        rollup::roll_up_range(&f.pool, T0, now).await.unwrap();

        let hour = query::chart(&f.pool, query::Scope::Machine(m), ChartRange::Hour, now).await.unwrap();
        assert_eq!(hour.resolution, Resolution::Raw);
        // Samples before T0 + 90 min move to the table keyed by GPU: the
        // hour chart then reads both tables and shows the same points.
        assert_eq!(store::settle_before(T0 + 95 * MINUTE_MS), T0 + 90 * MINUTE_MS);
        assert_eq!(store::move_settled(&f.pool, T0 + 90 * MINUTE_MS).await.unwrap(), 3 * 90 * 6);
        let again = query::chart(&f.pool, query::Scope::Machine(m), ChartRange::Hour, now).await.unwrap();
        for (a, b) in hour.series.iter().zip(&again.series) {
            assert_eq!((a.gpu_id, a.mem_total_mb, a.points.len()), (b.gpu_id, b.mem_total_mb, b.points.len()));
            for (p, q) in a.points.iter().zip(&b.points) {
                assert!(p.at_ms == q.at_ms && (p.util - q.util).abs() < 1e-9 && p.util_max == q.util_max, "{p:?} vs {q:?}");
            }
        }
        assert!(hour.simulated);
        assert_eq!(hour.series.len(), 2, "the machine's two GPUs, not the free one");
        for s in &hour.series {
            assert!(s.points.len() >= 100 && s.points.len() <= 300, "{} points", s.points.len());
            assert!(s.points.iter().all(|p| (75.0..90.0).contains(&p.util) && p.util_max >= p.util));
            assert_eq!(s.mem_total_mb, 81_920);
        }
        let day = query::chart(&f.pool, query::Scope::Machine(m), ChartRange::Day, now).await.unwrap();
        assert_eq!(day.resolution, Resolution::Minute);
        // 2 h of minutes in 5-minute points.
        assert_eq!(day.series[0].points.len(), 24);
        let week = query::chart(&f.pool, query::Scope::Node(f.node_id), ChartRange::Week, now).await.unwrap();
        assert_eq!((week.resolution.as_str(), week.series.len()), ("1h", 3));
        assert_eq!(week.series[2].points.len(), 2, "the free GPU's two hours show on the node chart");
        assert!(week.series[2].points.iter().all(|p| p.util < 5.0));
        assert_eq!((hour.reclaim_pct, hour.hot_pct), (5.0, 90.0));

        // Held: 2 GPUs × 2 h. Used: held × the series' mean utilisation.
        let usage = overview::held_vs_used(&f.pool, 24 * HOUR_MS, now).await.unwrap();
        assert_eq!(usage.len(), 1);
        assert!((usage[0].held_gpu_hours - 4.0).abs() < 1e-9, "{usage:?}");
        let w = telemetry::gpu_window(&f.pool, &f.gpu_ids[0..2], T0, now).await.unwrap();
        let mean = w.iter().map(|s| s.util_pct).sum::<f64>() / w.len() as f64;
        assert!((usage[0].used_gpu_hours - 4.0 * mean / 100.0).abs() < 1e-6, "{usage:?} mean {mean}");
        assert!((75.0..90.0).contains(&usage[0].efficiency_pct()));

        let cells: Vec<HeatCell> = overview::heatmap(&f.pool, now).await.unwrap();
        assert_eq!(cells.len(), 3);
        assert_eq!(cells[0].machine.as_deref(), Some("train"));
        assert_eq!(cells[0].owner.as_deref(), Some("tina"));
        assert!(cells[2].machine.is_none() && cells[2].util.unwrap() < 5.0);

        // Each series is labelled with its node and GPU, in the GPUs' order;
        // a GPU removed since still shows its history, labelled as removed.
        let labels = |c: &gantry_core::telemetry::view::ChartData| c.series.iter().map(|s| s.label.clone()).collect::<Vec<_>>();
        for (i, label) in labels(&week).iter().enumerate() {
            assert!(label.contains(&format!(" GPU {i} (")), "{:?}", labels(&week));
        }
        let gone = f.gpu_ids[1];
        sqlx::query("DELETE FROM machine_gpus WHERE gpu_id = ?").bind(gone).execute(&f.pool).await.unwrap();
        sqlx::query("DELETE FROM gpus WHERE id = ?").bind(gone).execute(&f.pool).await.unwrap();
        let after = query::chart(&f.pool, query::Scope::Machine(m), ChartRange::Day, now).await.unwrap();
        assert_eq!(labels(&after)[1], format!("GPU #{gone} (removed)"), "{:?}", labels(&after));
        assert!(labels(&after)[0].contains(" GPU 0 ("), "{:?}", labels(&after));
    }
}

gantry_testkit::timed_test! {
    async fn held_gpu_hours_over_a_day_count_no_more_than_a_day() {
        let f = fixture(1).await;
        let g = f.gpu_ids[0];
        let m = f.machine("always", "running", &[g], None).await;
        // Held for 48 whole hours, every minute, before an hour 59 minutes old.
        let hour0 = 1_000 * HOUR_MS;
        for h in 0..48 {
            sqlx::query(
                "INSERT INTO gpu_rollup_1h (gpu_id, bucket_ms, machine_id, node_id, samples, minutes, util_mean, util_max, mem_mean, mem_max, mem_total,
                                            temp_mean, temp_max, power_mean, power_max) VALUES (?, ?, ?, ?, 360, 60, 50, 50, 0, 0, 0, 40, 40, 100, 100)",
            )
            .bind(g)
            .bind(hour0 + h * HOUR_MS)
            .bind(m)
            .bind(f.node_id)
            .execute(&f.pool)
            .await
            .unwrap();
        }
        let now = hour0 + 47 * HOUR_MS + 59 * MINUTE_MS;
        let usage = overview::held_vs_used(&f.pool, 24 * HOUR_MS, now).await.unwrap();
        // The hours that start within the last 24 h: 23 whole ones and the current one.
        assert_eq!(usage[0].held_gpu_hours, 24.0, "{usage:?}");
        assert_eq!(usage[0].used_gpu_hours, 12.0, "{usage:?}");
    }
}
