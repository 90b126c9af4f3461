//! Migration 0003 rebuilds `nodes` and `machines`: a database made by the
//! previous release keeps every node, GPU, held GPU, machine and task, and
//! gets explicit endpoints and derived volume names.

use gantry_platform::db;
use sqlx::migrate::Migrator;
use std::borrow::Cow;

gantry_testkit::timed_test! {
    async fn an_existing_database_keeps_its_rows_through_the_engine_migration() {
        let dir = tempfile::tempdir().unwrap();
        let pool = db::connect_file(&dir.path().join("old.db")).await.unwrap();
        // The schema as the previous release left it (migrations 1 and 2).
        let old = Migrator { migrations: Cow::Owned(db::MIGRATOR.migrations[..2].to_vec()), ..Migrator::DEFAULT };
        old.run(&pool).await.unwrap();
        for sql in [
            "INSERT INTO groups (id, name, gpu_quota, gpus_in_use, created_at) VALUES (1, 'ml', 4, 1, 0)",
            "INSERT INTO users (id, username, password_hash, role, group_id, created_at) VALUES (1, 'alice', 'x', 'user', 1, 0)",
            "INSERT INTO nodes (id, name, region_id, docker_endpoint, executor, created_at) VALUES (1, 'local', 1, '', 'docker', 0)",
            "INSERT INTO nodes (id, name, region_id, docker_endpoint, executor, created_at) VALUES (2, 'sim', 1, '', 'simulated', 0)",
            "INSERT INTO nodes (id, name, region_id, docker_endpoint, executor, created_at) VALUES (3, 'far', 1, 'tcp://127.0.0.1:2375', 'docker', 0)",
            "INSERT INTO gpus (id, node_id, idx, uuid, model) VALUES (1, 1, 0, 'GPU-a', 'A100'), (2, 1, 1, 'GPU-b', 'A100')",
            "INSERT INTO images (id, name, reference, created_at) VALUES (1, 'devbox', 'gantry/devbox:latest', 0)",
            "INSERT INTO machines (id, name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_size_gb, state, created_at, updated_at)
             VALUES (7, 'box', 1, 1, 1, 1, 'A100', 1, 5, 'running', 0, 0)",
            "INSERT INTO machine_gpus (gpu_id, machine_id) VALUES (1, 7)",
            "INSERT INTO tasks (kind, machine_id, machine_name, requester_id, group_id, state, created_at, updated_at)
             VALUES ('create', 7, 'box', 1, 1, 'succeeded', 0, 0)",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
        db::migrate(&pool).await.unwrap();
        let count = |sql: &'static str| {
            let pool = pool.clone();
            async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await.unwrap() }
        };
        assert_eq!(count("SELECT COUNT(*) FROM gpus").await, 2, "no GPU was cascaded away by the rebuild");
        assert_eq!(count("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = 7").await, 1);
        assert_eq!(count("SELECT COUNT(*) FROM tasks WHERE machine_id = 7").await, 1);
        let endpoints: Vec<String> = sqlx::query_scalar("SELECT docker_endpoint FROM nodes ORDER BY id").fetch_all(&pool).await.unwrap();
        assert_eq!(endpoints, ["unix:///var/run/docker.sock", "simulated://sim", "tcp://127.0.0.1:2375"]);
        let instance = gantry_platform::machines::instance_id(&pool).await.unwrap();
        let volume: String = sqlx::query_scalar("SELECT volume_name FROM machines WHERE id = 7").fetch_one(&pool).await.unwrap();
        assert_eq!(volume, gantry_platform::machines::volume_name(&instance, 7));
        assert_eq!(count("SELECT COUNT(*) FROM pragma_foreign_key_check").await, 0);
        assert_eq!(count("SELECT foreign_keys FROM pragma_foreign_keys").await, 1, "foreign keys are on again");
        // Running the migrations again changes nothing.
        db::migrate(&pool).await.unwrap();
    }
}
