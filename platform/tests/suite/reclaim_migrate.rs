//! Migration 0008 rebuilds `machines` and `tasks` (new state `reclaimed`,
//! new task kinds): every column the earlier migrations gave them must
//! survive the rebuild with its data, whatever migration added it.

use gantry_platform::db;
use sqlx::migrate::Migrator;
use std::borrow::Cow;

async fn columns(pool: &db::Pool, table: &str) -> Vec<String> {
    sqlx::query_scalar(&format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"))
        .fetch_all(pool)
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    async fn the_rebuild_keeps_every_earlier_column_and_row() {
        let dir = tempfile::tempdir().unwrap();
        let pool = db::connect_file(&dir.path().join("old.db")).await.unwrap();
        let before: Vec<_> = db::MIGRATOR.migrations.iter().filter(|m| m.version < 8).cloned().collect();
        assert!(db::MIGRATOR.migrations.iter().any(|m| m.version == 8), "migration 0008 is compiled in");
        Migrator { migrations: Cow::Owned(before), ..Migrator::DEFAULT }.run(&pool).await.unwrap();
        let old_machines = columns(&pool, "machines").await;
        let old_tasks = columns(&pool, "tasks").await;
        for sql in [
            "INSERT INTO groups (id, name, gpu_quota, gpus_in_use, created_at) VALUES (5, 'ml', 4, 1, 0)",
            "INSERT INTO users (id, username, password_hash, role, group_id, created_at) VALUES (5, 'alice', 'x', 'user', 5, 0)",
            "INSERT INTO nodes (id, name, region_id, docker_endpoint, executor, created_at) VALUES (5, 'n5', 1, 'simulated://n5', 'simulated', 0)",
            "INSERT INTO gpus (id, node_id, idx, uuid, model) VALUES (50, 5, 0, 'GPU-x', 'A100')",
            "INSERT INTO images (id, name, reference, created_at) VALUES (5, 'devbox5', 'gantry/devbox:latest', 0)",
            "INSERT INTO machines (id, name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb, state,
                                   created_at, updated_at, sim_pattern, message)
             VALUES (7, 'box', 5, 5, 5, 1, 'A100', 5, 'vol7', 5, 'running', 0, 0, 'idle', 'kept message')",
            "INSERT INTO machine_gpus (gpu_id, machine_id) VALUES (50, 7)",
            "INSERT INTO tasks (kind, machine_id, machine_name, requester_id, group_id, state, created_at, updated_at, lease_owner)
             VALUES ('create', 7, 'box', 5, 5, 'succeeded', 0, 0, 'me')",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        db::migrate(&pool).await.unwrap();
        let new_machines = columns(&pool, "machines").await;
        let new_tasks = columns(&pool, "tasks").await;
        for c in &old_machines {
            assert!(new_machines.contains(c), "machines.{c} was dropped by the 0008 rebuild");
        }
        for c in &old_tasks {
            assert!(new_tasks.contains(c), "tasks.{c} was dropped by the 0008 rebuild");
        }
        let row: (String, String, String, Option<i64>) =
            sqlx::query_as("SELECT state, sim_pattern, message, reclaim_deadline FROM machines WHERE id = 7").fetch_one(&pool).await.unwrap();
        assert_eq!(row, ("running".into(), "idle".into(), "kept message".into(), None));
        let held: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = 7").fetch_one(&pool).await.unwrap();
        assert_eq!(held, 1, "held GPUs were not cascaded away");
        let owner: Option<String> = sqlx::query_scalar("SELECT lease_owner FROM tasks WHERE machine_id = 7").fetch_one(&pool).await.unwrap();
        assert_eq!(owner.as_deref(), Some("me"));
        // The new values are accepted, unknown ones still refused.
        sqlx::query("UPDATE machines SET state = 'reclaimed' WHERE id = 7").execute(&pool).await.unwrap();
        assert!(sqlx::query("UPDATE machines SET state = 'asleep' WHERE id = 7").execute(&pool).await.is_err());
        sqlx::query("UPDATE tasks SET kind = 'restore' WHERE machine_id = 7").execute(&pool).await.unwrap();
        let settings: (f64, i64) = sqlx::query_as("SELECT threshold_pct, window_secs FROM reclaim_settings").fetch_one(&pool).await.unwrap();
        assert_eq!(settings, (5.0, 7200));
        let broken: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pragma_foreign_key_check").fetch_one(&pool).await.unwrap();
        assert_eq!(broken, 0);
    }
}
