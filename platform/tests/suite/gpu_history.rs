//! What the charts and the overview show of a GPU belongs to that GPU,
//! and only while its reading is current.
//!
//! GPU ids are never handed out again (migration 0018): the telemetry
//! tables key a GPU's history by its id with no foreign key, so a reused id
//! made a newly registered card inherit the charts of a removed one.
//!
//! A reading belongs to the machine it was taken for: once the card has
//! another holder, the overview shows no reading until one is taken for it.
//!
//! A lost node's GPUs are no longer sampled, so their last reading in
//! `gpu_latest` goes stale at once: the cluster overview shows them as "no
//! reading" rather than with a utilisation that looks live.

use gantry_testkit::telemetry::{fixture, Fixture};

use gantry_core::telemetry::ChartRange;
use gantry_platform::{
    db,
    gpus::{self, DiscoveredGpu},
    telemetry::{self, overview, query, rollup},
    transitions,
};
use sqlx::migrate::Migrator;
use std::borrow::Cow;

const T0: i64 = 1_700_002_800_000;

fn card(index: u32, uuid: &str) -> DiscoveredGpu {
    DiscoveredGpu { index, uuid: uuid.into(), model: "SIM-A100".into(), memory_mb: 81_920, simulated: true }
}

async fn register(pool: &db::Pool, name: &str, found: &[DiscoveredGpu]) -> i64 {
    gantry_testkit::engine::register_simulated(pool, name, found).await.unwrap()
}

/// Ten minutes of samples of every GPU, rolled up: history at every
/// resolution the charts read (raw, minutes, hours).
async fn history(f: &Fixture) -> i64 {
    for step in 0..60 {
        telemetry::sample_once(&f.pool, T0 + step * 10_000).await.unwrap();
    }
    let now = T0 + 10 * 60_000;
    rollup::roll_up_range(&f.pool, T0, now).await.unwrap();
    now
}

/// Every chart range of the node: no GPU of it may show a single point.
async fn assert_node_has_no_history(f: &Fixture, node_id: i64, now: i64) {
    for range in ChartRange::ALL {
        let chart = query::chart(&f.pool, query::Scope::Node(node_id), range, now).await.unwrap();
        assert!(!chart.series.is_empty(), "the node's GPUs are charted");
        for s in &chart.series {
            assert!(
                s.points.is_empty(),
                "new GPU #{} shows {} point(s) of another GPU's history ({range:?})",
                s.gpu_id,
                s.points.len()
            );
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_removed_nodes_gpu_ids_go_to_no_new_gpu() {
        let f = fixture(2).await;
        let top = *f.gpu_ids.iter().max().unwrap();
        let now = history(&f).await;
        assert!(f.count(&format!("SELECT COUNT(*) FROM gpu_rollup_1h WHERE gpu_id = {top}")).await > 0, "history was written");

        sqlx::query("UPDATE nodes SET state = 'lost' WHERE id = ?").bind(f.node_id).execute(&f.pool).await.unwrap();
        transitions::node::remove(&f.pool, None, f.node_id).await.unwrap();
        let node = register(&f.pool, "fresh", &[card(0, "GPU-new-0"), card(1, "GPU-new-1")]).await;
        let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM gpus WHERE node_id = ?").bind(node).fetch_all(&f.pool).await.unwrap();
        assert!(ids.iter().all(|id| *id > top), "new GPU ids {ids:?} reuse a removed GPU's (highest was {top})");
        assert_node_has_no_history(&f, node, now).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_gpu_gone_from_its_node_leaves_its_id_unused() {
        let f = fixture(2).await;
        let top = *f.gpu_ids.iter().max().unwrap();
        let now = history(&f).await;
        let uuids: Vec<String> = sqlx::query_scalar("SELECT uuid FROM gpus WHERE node_id = ? ORDER BY idx").bind(f.node_id).fetch_all(&f.pool).await.unwrap();

        // The highest-id card is gone (free, so its row goes); a new card
        // takes its slot at the next registration.
        register(&f.pool, "tnode", &[card(0, &uuids[0])]).await;
        register(&f.pool, "tnode", &[card(0, &uuids[0]), card(1, "GPU-replacement")]).await;
        let new: i64 = sqlx::query_scalar("SELECT id FROM gpus WHERE uuid = 'GPU-replacement'").fetch_one(&f.pool).await.unwrap();
        assert!(new > top, "the replacement card got id {new}, a removed GPU's (highest was {top})");
        let chart = query::chart(&f.pool, query::Scope::Node(f.node_id), ChartRange::Hour, now).await.unwrap();
        let replacement = chart.series.iter().find(|s| s.gpu_id == new).expect("the replacement is charted");
        assert!(replacement.points.is_empty(), "the replacement shows the removed card's history: {:?}", replacement.points.len());
    }
}

async fn ids_at_0017(pool: &db::Pool) -> Vec<(i64, i64, i64, String, String, i64, i64)> {
    sqlx::query_as("SELECT id, node_id, idx, uuid, model, memory_mb, simulated FROM gpus ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    async fn migration_0018_keeps_every_gpu_and_skips_ids_with_history() {
        let dir = tempfile::tempdir().unwrap();
        let pool = db::connect_file(&dir.path().join("old.db")).await.unwrap();
        let before: Vec<_> = db::MIGRATOR.migrations.iter().filter(|m| m.version < 18).cloned().collect();
        assert!(db::MIGRATOR.migrations.iter().any(|m| m.version == 18), "migration 0018 is compiled in");
        Migrator { migrations: Cow::Owned(before), ..Migrator::DEFAULT }.run(&pool).await.unwrap();
        let schema = |pool: db::Pool| async move {
            let cols: Vec<(String, String, i64, Option<String>, i64)> = sqlx::query_as(
                "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('gpus') ORDER BY cid",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            let fks: Vec<(String, String, String, String)> =
                sqlx::query_as("SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('gpus')").fetch_all(&pool).await.unwrap();
            let uniques: Vec<String> = sqlx::query_scalar(
                "SELECT group_concat(ii.name) FROM pragma_index_list('gpus') il, pragma_index_info(il.name) ii WHERE il.\"unique\" GROUP BY il.name ORDER BY 1",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            (cols, fks, uniques)
        };
        let old_schema = schema(pool.clone()).await;
        assert_eq!(old_schema.2, ["node_id,idx", "uuid"], "the unique constraints are compared");
        assert_eq!(old_schema.1.len(), 1, "the foreign key to nodes is compared");
        for sql in [
            "INSERT INTO groups (id, name, gpu_quota, gpus_in_use, created_at) VALUES (5, 'ml', 4, 1, 0)",
            "INSERT INTO users (id, username, password_hash, role, group_id, created_at) VALUES (5, 'alice', 'x', 'user', 5, 0)",
            "INSERT INTO nodes (id, name, region_id, docker_endpoint, executor, created_at) VALUES (5, 'n5', 1, 'simulated://n5', 'simulated', 0)",
            "INSERT INTO gpus (id, node_id, idx, uuid, model, memory_mb, simulated) VALUES (3, 5, 0, 'GPU-a', 'A100', 81920, 1), (7, 5, 1, 'GPU-b', 'H100', 1024, 0)",
            "INSERT INTO images (id, name, reference, created_at) VALUES (5, 'devbox5', 'gantry/devbox:latest', 0)",
            "INSERT INTO machines (id, name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb, state, created_at, updated_at)
             VALUES (9, 'box', 5, 5, 5, 1, 'A100', 5, 'vol9', 5, 'running', 0, 0)",
            "INSERT INTO machine_gpus (gpu_id, machine_id) VALUES (7, 9)",
            "INSERT INTO gpu_latest (gpu_id, at_ms, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, source) VALUES (7, 1, 50, 1, 2, 40, 100, 'simulated')",
            // History of GPUs removed before the migration: 12 in the
            // recent samples, 15 only in the hour rollups.
            "INSERT INTO gpu_samples_recent (gpu_id, at_ms, node_id, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w) VALUES (12, 1, 4, 1, 1, 1, 1, 1)",
            "INSERT INTO gpu_rollup_1h (gpu_id, bucket_ms, machine_id, node_id, samples, minutes, util_mean, util_max, mem_mean, mem_max, mem_total,
                                        temp_mean, temp_max, power_mean, power_max) VALUES (15, 0, 0, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        let rows = ids_at_0017(&pool).await;
        db::migrate(&pool).await.unwrap();

        assert_eq!(ids_at_0017(&pool).await, rows, "every GPU keeps its row and id");
        assert_eq!(schema(pool.clone()).await, old_schema, "same columns, foreign key and unique constraints");
        let count = |sql: &'static str| {
            let pool = pool.clone();
            async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await.unwrap() }
        };
        assert_eq!(count("SELECT COUNT(*) FROM machine_gpus WHERE gpu_id = 7 AND machine_id = 9").await, 1, "held GPU kept");
        assert_eq!(count("SELECT COUNT(*) FROM gpu_latest WHERE gpu_id = 7").await, 1, "latest reading not cascaded away");
        assert_eq!(count("SELECT COUNT(*) FROM pragma_foreign_key_check").await, 0);
        assert_eq!(count("SELECT foreign_keys FROM pragma_foreign_keys").await, 1, "foreign keys are on again");
        assert_eq!(count("SELECT instr(sql, 'AUTOINCREMENT') > 0 FROM sqlite_master WHERE name = 'gpus'").await, 1);

        // The next GPU is above every id with history, not only above the
        // rows left; and the cascade from nodes still holds.
        sqlx::query("INSERT INTO gpus (node_id, idx, uuid, model) VALUES (5, 2, 'GPU-c', 'A100')").execute(&pool).await.unwrap();
        assert_eq!(count("SELECT MAX(id) FROM gpus").await, 16);
        assert!(sqlx::query("INSERT INTO gpus (node_id, idx, uuid, model) VALUES (5, 3, 'GPU-c', 'A100')").execute(&pool).await.is_err(), "uuid unique");
        sqlx::query("DELETE FROM machine_gpus").execute(&pool).await.unwrap();
        sqlx::query("UPDATE machines SET node_id = NULL").execute(&pool).await.unwrap();
        sqlx::query("DELETE FROM nodes WHERE id = 5").execute(&pool).await.unwrap();
        assert_eq!(count("SELECT COUNT(*) FROM gpus").await + count("SELECT COUNT(*) FROM gpu_latest").await, 0, "cascades");
        // Running the migrations again changes nothing.
        db::migrate(&pool).await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn a_lost_nodes_gpus_show_no_reading_in_the_overview() {
        let f = fixture(2).await;
        f.machine("cooker", "running", &f.gpu_ids[0..1], Some("hot")).await;
        // The fixture's machine is made by SQL: count its GPU against the
        // group, as admission would, so marking the node lost can refund it.
        sqlx::query("UPDATE groups SET gpus_in_use = 1 WHERE id = (SELECT group_id FROM users WHERE id = ?)").bind(f.user_id).execute(&f.pool).await.unwrap();
        // A second node that stays ready: its readings must still show.
        let found = gpus::simulated("other", &gpus::SimulatedGpus { count: 1, model: "SIM-A100".into(), memory_mb: 81_920 });
        let other = register(&f.pool, "other", &found).await;
        assert_eq!(telemetry::sample_once(&f.pool, T0).await.unwrap(), 3);
        let cells = overview::heatmap(&f.pool, T0).await.unwrap();
        assert!(cells.iter().all(|c| c.util.is_some() && c.temp_c.is_some() && c.at_ms == Some(T0)), "{cells:?}");

        transitions::node::mark_lost(&f.pool, None, f.node_id, "power supply failed").await.unwrap();
        telemetry::sample_once(&f.pool, T0 + 10_000).await.unwrap();
        let cells = overview::heatmap(&f.pool, T0 + 10_000).await.unwrap();
        assert_eq!(cells.len(), 3, "a lost node's GPUs are still listed: {cells:?}");
        for c in &cells {
            if c.node_id == f.node_id {
                assert_eq!((c.util, c.temp_c, c.at_ms), (None, None, None), "GPU {} of the lost node shows a stale reading as live", c.idx);
            } else {
                assert_eq!((c.node_id, c.at_ms), (other, Some(T0 + 10_000)), "a ready node's reading still shows");
                assert!(c.util.is_some() && c.temp_c.is_some());
            }
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_silent_gpus_last_reading_is_not_shown_as_current() {
        let f = fixture(2).await;
        assert_eq!(telemetry::sample_once(&f.pool, T0).await.unwrap(), 2);
        let stale = overview::stale_after_ms(&telemetry::config());
        let readings = |cells: &[gantry_core::telemetry::view::HeatCell]| cells.iter().filter(|c| c.util.is_some() || c.at_ms.is_some()).count();

        // Within the limit the reading is current.
        assert_eq!(readings(&overview::heatmap(&f.pool, T0 + stale - 1).await.unwrap()), 2);
        // The node was never marked lost, but nothing has been heard since:
        // the cards are listed with no reading rather than as they last were.
        let cells = overview::heatmap(&f.pool, T0 + stale + 1).await.unwrap();
        assert_eq!(cells.len(), 2, "still listed");
        assert_eq!(readings(&cells), 0, "a reading {stale} ms old shows as current: {cells:?}");
    }
}

gantry_testkit::timed_test! {
    async fn a_reading_taken_for_the_cards_last_holder_is_not_shown_under_the_next() {
        let f = fixture(2).await;
        let first = f.machine("first", "running", &f.gpu_ids[0..1], Some("hot")).await;
        assert_eq!(telemetry::sample_once(&f.pool, T0).await.unwrap(), 2);
        // The card changes hands before the next sample.
        sqlx::query("DELETE FROM machine_gpus WHERE machine_id = ?").bind(first).execute(&f.pool).await.unwrap();
        f.machine("second", "running", &f.gpu_ids[0..1], None).await;
        let cells = overview::heatmap(&f.pool, T0 + 1).await.unwrap();
        let moved = cells.iter().find(|c| c.gpu_id == f.gpu_ids[0]).unwrap();
        assert_eq!(moved.machine.as_deref(), Some("second"));
        assert_eq!((moved.util, moved.at_ms), (None, None), "first's reading shown as second's: {moved:?}");
        let free = cells.iter().find(|c| c.gpu_id == f.gpu_ids[1]).unwrap();
        assert_eq!(free.at_ms, Some(T0), "a free card's reading is its own");
        // The next sample is taken for the new holder, and shows.
        telemetry::sample_once(&f.pool, T0 + 10_000).await.unwrap();
        let cells = overview::heatmap(&f.pool, T0 + 10_000).await.unwrap();
        assert_eq!(cells.iter().find(|c| c.gpu_id == f.gpu_ids[0]).unwrap().at_ms, Some(T0 + 10_000));
    }
}

gantry_testkit::timed_test! {
    async fn a_cell_carries_every_figure_of_one_reading() {
        let f = fixture(2).await;
        f.machine("cooker", "running", &f.gpu_ids[0..1], Some("hot")).await;
        assert_eq!(telemetry::sample_once(&f.pool, T0).await.unwrap(), 2);
        let cells = overview::heatmap(&f.pool, T0).await.unwrap();
        for c in &cells {
            // `/metrics` writes all five gauges from the cell: they must be
            // the one `gpu_latest` row the utilisation came from.
            let row: (f64, f64, i64, i64, f64, i64) =
                sqlx::query_as("SELECT util_pct, temp_c, mem_used_mb, mem_total_mb, power_w, at_ms FROM gpu_latest WHERE gpu_id = ?").bind(c.gpu_id).fetch_one(&f.pool).await.unwrap();
            assert_eq!((c.util, c.temp_c, c.mem_used_mb, c.mem_total_mb, c.power_w, c.at_ms), (Some(row.0), Some(row.1), Some(row.2), Some(row.3), Some(row.4), Some(row.5)));
            assert!(row.3 > 0 && row.4 > 0.0, "a sampled card has memory and draws power: {c:?}");
        }
        // A reading that is no longer current takes all its figures with it.
        let stale = overview::stale_after_ms(&telemetry::config());
        let cells = overview::heatmap(&f.pool, T0 + stale + 1).await.unwrap();
        assert!(cells.iter().all(|c| (c.mem_used_mb, c.mem_total_mb, c.power_w) == (None, None, None)), "{cells:?}");
    }
}
