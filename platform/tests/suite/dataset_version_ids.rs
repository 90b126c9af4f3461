//! Dataset version ids are never handed out again (migration 0021): work
//! still holding a deleted version's id — a replace being undone checks its
//! version still exists before putting the listed file back — must never
//! find a new version under it.

use crate::datasets_support::*;
use gantry_platform::{datasets, db};
use sqlx::migrate::Migrator;
use std::borrow::Cow;

gantry_testkit::timed_test! {
    async fn a_deleted_versions_id_is_not_given_to_the_next_version() {
        let env = env().await;
        let top = datasets::create_version(&env.pool, &env.alice, "coco", "v2").await.unwrap().id;
        datasets::delete_version(&env.pool, &env.stores, &env.alice, "coco", "v2").await.unwrap();
        let again = datasets::create_version(&env.pool, &env.alice, "coco", "v2").await.unwrap().id;
        assert!(again > top, "the recreated version got id {again}, the deleted one's (highest was {top})");
    }
}

gantry_testkit::timed_test! {
    async fn migration_0021_keeps_every_version_and_what_refers_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let pool = db::connect_file(&dir.path().join("old.db")).await.unwrap();
        assert!(db::MIGRATOR.migrations.iter().any(|m| m.version == 21), "migration 0021 is compiled in");
        let before: Vec<_> = db::MIGRATOR.migrations.iter().filter(|m| m.version < 21).cloned().collect();
        Migrator { migrations: Cow::Owned(before), ..Migrator::DEFAULT }.run(&pool).await.unwrap();
        let schema = |pool: db::Pool| async move {
            let cols: Vec<(String, String, i64, Option<String>, i64)> =
                sqlx::query_as("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('dataset_versions') ORDER BY cid")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            let fks: Vec<(String, String, String, String)> =
                sqlx::query_as("SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('dataset_versions') ORDER BY 1")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            let uniques: Vec<String> = sqlx::query_scalar(
                "SELECT group_concat(ii.name) FROM pragma_index_list('dataset_versions') il, pragma_index_info(il.name) ii WHERE il.\"unique\" GROUP BY il.name ORDER BY 1",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            (cols, fks, uniques)
        };
        let old_schema = schema(pool.clone()).await;
        assert_eq!(old_schema.1.len(), 2, "the foreign keys to datasets and users are compared");
        for sql in [
            "INSERT INTO groups (id, name, gpu_quota, gpus_in_use, created_at) VALUES (5, 'ml', 4, 0, 0)",
            "INSERT INTO users (id, username, password_hash, role, group_id, created_at) VALUES (5, 'alice', 'x', 'user', 5, 0)",
            "INSERT INTO datasets (id, code, name, region_id, category, description, visibility, group_id, created_by, created_at)
             VALUES (2, 'coco', 'COCO', 1, 'images', '', 'group', 5, 5, 0)",
            "INSERT INTO dataset_versions (id, dataset_id, name, sealed_at, created_by, created_at) VALUES (3, 2, 'v1', 10, 5, 0), (7, 2, 'v2', NULL, 5, 1)",
            "INSERT INTO dataset_files (version_id, name, size, sha256, uploaded_by, uploaded_at) VALUES (7, 'a.txt', 1, 'ab', 5, 2)",
            "INSERT INTO images (id, name, reference, created_at) VALUES (5, 'devbox5', 'gantry/devbox:latest', 0)",
            "INSERT INTO machines (id, name, owner_id, group_id, image_id, gpu_count, gpu_model, volume_name, volume_size_gb, state, created_at, updated_at)
             VALUES (9, 'box', 5, 5, 5, 1, 'A100', 'vol9', 5, 'running', 0, 0)",
            "INSERT INTO machine_datasets (machine_id, version_id, host_dir, target) VALUES (9, 3, '/data/coco/v1', '/datasets/coco/v1')",
            // A queued task names its mounts' versions by id, without a
            // foreign key: 12 was deleted since (a task is refused a
            // deleted version when it starts, but holds the id).
            "INSERT INTO compute_tasks (id, name, requester_id, group_id, framework, framework_version, interpreter, interpreter_version, command,
                                        gpu_count, cpu_millis, memory_mb, time_limit_secs, state, created_at, updated_at, datasets)
             VALUES (4, 'train', 5, 5, 'pytorch', '2', 'python', '3', '[]', 1, 1000, 1024, 60, 'pending', 0, 0,
                     '[{\"version_id\":12,\"name\":\"coco/v9\",\"host_dir\":\"/d\",\"target\":\"/t\"}]')",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let rows = |pool: db::Pool| async move {
            sqlx::query_as::<_, (i64, i64, String, Option<i64>, i64, i64)>(
                "SELECT id, dataset_id, name, sealed_at, created_by, created_at FROM dataset_versions ORDER BY id",
            )
            .fetch_all(&pool)
            .await
            .unwrap()
        };
        let before = rows(pool.clone()).await;
        db::migrate(&pool).await.unwrap();

        assert_eq!(rows(pool.clone()).await, before, "every version keeps its row and id");
        assert_eq!(schema(pool.clone()).await, old_schema, "same columns, foreign keys and unique constraint");
        let count = |sql: &'static str| {
            let pool = pool.clone();
            async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await.unwrap() }
        };
        assert_eq!(count("SELECT COUNT(*) FROM dataset_files WHERE version_id = 7").await, 1, "files not cascaded away");
        assert_eq!(count("SELECT COUNT(*) FROM machine_datasets WHERE version_id = 3").await, 1, "mount not cascaded away");
        assert_eq!(count("SELECT COUNT(*) FROM pragma_foreign_key_check").await, 0);
        assert_eq!(count("SELECT foreign_keys FROM pragma_foreign_keys").await, 1, "foreign keys are on again");
        assert_eq!(count("SELECT instr(sql, 'AUTOINCREMENT') > 0 FROM sqlite_master WHERE name = 'dataset_versions'").await, 1);

        // The next version is above every id still held, not only above
        // the rows left; the unique name and the cascades still hold.
        sqlx::query("INSERT INTO dataset_versions (dataset_id, name, created_by, created_at) VALUES (2, 'v3', 5, 3)").execute(&pool).await.unwrap();
        assert_eq!(count("SELECT MAX(id) FROM dataset_versions").await, 13);
        assert!(sqlx::query("INSERT INTO dataset_versions (dataset_id, name, created_by, created_at) VALUES (2, 'v3', 5, 3)").execute(&pool).await.is_err(), "name unique per dataset");
        sqlx::query("DELETE FROM dataset_versions WHERE id = 7").execute(&pool).await.unwrap();
        assert_eq!(count("SELECT COUNT(*) FROM dataset_files").await, 0, "a version's files go with it");
        sqlx::query("DELETE FROM dataset_versions WHERE id = 3").execute(&pool).await.unwrap();
        assert_eq!(count("SELECT COUNT(*) FROM machine_datasets").await, 0, "a version's mounts go with it");
        // Running the migrations again changes nothing.
        db::migrate(&pool).await.unwrap();
    }
}
