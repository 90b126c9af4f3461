//! Snapshot ids are never handed out again (migration 0032). A snapshot's
//! image tag is made from its id (`gantry-snap-<instance>:s<id>`), and
//! machines keep the snapshot they came from by id without a foreign key:
//! before, deleting the newest snapshot gave its id — and its tag, and the
//! internal image row named after the tag — to the next snapshot taken, so
//! a machine made or restored from the deleted one named an unrelated
//! snapshot as its origin.

use crate::reclaim_common::{machine_state, task_outcome};
use crate::reclaim_snapshots::{reclaim_now, running, sim_env};
use gantry_testkit::engine;

use gantry_core::task::TaskKind;
use gantry_platform::{
    db,
    machines::{self, OperationRequest},
    reclaim, reconcile, snapshots,
};
use sqlx::migrate::Migrator;
use std::borrow::Cow;

async fn image_ref(env: &engine::Env, snapshot: i64) -> String {
    env.text(&format!("SELECT image_ref FROM snapshots WHERE id = {snapshot}")).await
}

/// What machine `m` says it came from: its from_snapshot_id (or none) and
/// the tag of the image it was made from.
async fn lineage(env: &engine::Env, m: i64) -> (Option<i64>, String) {
    sqlx::query_as(
        "SELECT m.from_snapshot_id, i.reference FROM machines m JOIN images i ON i.id = m.image_id WHERE m.id = ?",
    )
    .bind(m)
    .fetch_one(&env.pool)
    .await
    .unwrap()
}

async fn delete_machine(env: &engine::Env, who: &gantry_platform::accounts::User, m: i64) {
    let del = machines::request_operation(
        &env.pool,
        who,
        OperationRequest { machine_id: m, kind: TaskKind::Delete, keep_volume: false },
    )
    .await
    .unwrap();
    env.drive().await;
    assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");
}

gantry_testkit::timed_test! {
    async fn a_deleted_newest_snapshots_id_and_tag_are_not_given_to_the_next() {
        let (env, sim, alice) = sim_env().await;
        let a = running(&env, &alice, "origin").await;
        let (old, _) = snapshots::request(&env.pool, &alice, a, "old").await.unwrap();
        env.drive().await;
        let old_ref = image_ref(&env, old).await;
        // A machine made from it, deleted since: its history names it.
        let copy = snapshots::create_machine(&env.pool, env.create(&alice, "copy", 1), old).await.unwrap().machine_id;
        env.drive().await;
        assert_eq!(lineage(&env, copy).await, (Some(old), old_ref.clone()));
        delete_machine(&env, &alice, copy).await;

        // The newest snapshot is deleted, image first; then another is taken.
        snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, old).await.unwrap();
        assert!(!sim.committed_images().contains(&old_ref));
        let (new, _) = snapshots::request(&env.pool, &alice, a, "new").await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {new}")).await, "ready");
        assert!(new > old, "the new snapshot got id {new}, the deleted one's was {old}");
        let new_ref = image_ref(&env, new).await;
        assert_ne!(new_ref, old_ref, "the new snapshot was committed under the deleted one's tag");
        assert!(sim.committed_images().contains(&new_ref));

        // The deleted snapshot's machine does not name the new one.
        let (from, reference) = lineage(&env, copy).await;
        assert_ne!(from, Some(new));
        assert_eq!(reference, old_ref, "the copy's image is the deleted snapshot's, not the new one's");
        // A machine from the new snapshot gets an image row of its own.
        let fresh = snapshots::create_machine(&env.pool, env.create(&alice, "fresh", 1), new).await.unwrap().machine_id;
        env.drive().await;
        assert_eq!(machine_state(&env.pool, fresh).await.0, "running");
        assert_eq!(lineage(&env, fresh).await, (Some(new), new_ref));
        let images = |m: i64| format!("SELECT image_id FROM machines WHERE id = {m}");
        assert_ne!(env.scalar(&images(fresh)).await, env.scalar(&images(copy)).await);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_machine_restored_from_a_deleted_snapshot_never_names_the_next_one() {
        let (env, _sim, alice) = sim_env().await;
        let other = running(&env, &alice, "other").await;
        let napper = running(&env, &alice, "napper").await;
        // Reclaimed and restored: it now runs from its reclaim snapshot.
        let point = reclaim_now(&env, napper).await;
        let point_ref = image_ref(&env, point).await;
        let task = reclaim::restore(&env.pool, &alice, napper).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
        assert_eq!(lineage(&env, napper).await, (Some(point), point_ref.clone()));

        // Deleted: the reconciler deletes its restore point, the newest snapshot.
        delete_machine(&env, &alice, napper).await;
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE id = {point}")).await, 0);

        let (next, _) = snapshots::request(&env.pool, &alice, other, "next").await.unwrap();
        env.drive().await;
        assert!(next > point, "the next snapshot got id {next}, the deleted restore point's was {point}");
        let next_ref = image_ref(&env, next).await;
        assert_ne!(next_ref, point_ref);
        let (from, reference) = lineage(&env, napper).await;
        assert_ne!(from, Some(next), "the restored machine names the new snapshot as its origin");
        assert_ne!(reference, next_ref, "the restored machine's image is the new snapshot's tag");
    }
}

gantry_testkit::timed_test! {
    async fn migration_0032_keeps_every_snapshot_and_starts_above_every_id_held() {
        let dir = tempfile::tempdir().unwrap();
        let pool = db::connect_file(&dir.path().join("old.db")).await.unwrap();
        assert!(db::MIGRATOR.migrations.iter().any(|m| m.version == 32), "migration 0032 is compiled in");
        let before: Vec<_> = db::MIGRATOR.migrations.iter().filter(|m| m.version < 32).cloned().collect();
        Migrator { migrations: Cow::Owned(before), ..Migrator::DEFAULT }.run(&pool).await.unwrap();
        let schema = |pool: db::Pool| async move {
            let cols: Vec<(String, String, i64, Option<String>, i64)> =
                sqlx::query_as("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('snapshots') ORDER BY cid")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            let fks: Vec<(String, String, String, String)> =
                sqlx::query_as("SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('snapshots') ORDER BY 2")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            let indexes: Vec<(String, i64, String)> = sqlx::query_as(
                "SELECT il.name, il.\"unique\", group_concat(ii.name) FROM pragma_index_list('snapshots') il, pragma_index_info(il.name) ii
                 GROUP BY il.name ORDER BY 2, 3",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            let named: Vec<String> =
                sqlx::query_scalar("SELECT name || ': ' || sql FROM sqlite_master WHERE tbl_name = 'snapshots' AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY name")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            (cols, fks, indexes.into_iter().map(|(name, unique, cols)| (name.starts_with("sqlite_autoindex"), unique, cols)).collect::<Vec<_>>(), named)
        };
        let old_schema = schema(pool.clone()).await;
        assert_eq!(old_schema.1.len(), 6, "every foreign key is compared: {:?}", old_schema.1);
        assert_eq!(old_schema.2.len(), 3, "the unique tag and the two indexes are compared: {:?}", old_schema.2);
        let instance: String = sqlx::query_scalar("SELECT value FROM settings WHERE key = 'instance_id'").fetch_one(&pool).await.unwrap();
        for sql in [
            "INSERT INTO groups (id, name, gpu_quota, gpus_in_use, created_at) VALUES (5, 'ml', 4, 0, 0)".to_string(),
            "INSERT INTO users (id, username, password_hash, role, group_id, created_at) VALUES (5, 'alice', 'x', 'user', 5, 0)".into(),
            "INSERT INTO images (id, name, reference, created_at) VALUES (5, 'devbox5', 'gantry/devbox:latest', 0)".into(),
            // The internal image row of snapshot 15, deleted since: its tag names it.
            format!("INSERT INTO images (id, name, reference, internal, created_at) VALUES (6, 'snapshot:gantry-snap-{instance}:s15', 'gantry-snap-{instance}:s15', 1, 0)"),
            // Another installation's tag says nothing about this one's ids.
            "INSERT INTO images (id, name, reference, internal, created_at) VALUES (7, 'snapshot:gantry-snap-other:s99', 'gantry-snap-other:s99', 1, 0)".into(),
            // Made from snapshot 9 (deleted since), restored from 3.
            "INSERT INTO machines (id, name, owner_id, group_id, image_id, gpu_count, gpu_model, volume_name, volume_size_gb, state, created_at, updated_at,
                                   from_snapshot_id, restore_snapshot_id)
             VALUES (9, 'box', 5, 5, 6, 1, 'A100', 'vol9', 5, 'running', 0, 0, 9, 3)".into(),
            format!("INSERT INTO snapshots (id, name, image_ref, machine_id, machine_name, node_id, owner_id, group_id, parent_id, origin, state, size_bytes, message, created_at, base_image_id)
             VALUES (3, 'first', 'gantry-snap-{instance}:s3', 9, 'box', NULL, 5, 5, NULL, 'reclaim', 'ready', 10, '', 1, 5),
                    (7, 'second', 'gantry-snap-{instance}:s7', 9, 'box', NULL, 5, 5, 3, 'user', 'failed', 0, 'why', 2, NULL)"),
            // A task's payload names a snapshot by id (12, deleted since).
            "INSERT INTO tasks (id, kind, machine_id, machine_name, requester_id, group_id, state, created_at, updated_at, payload)
             VALUES (4, 'reinstall', 9, 'box', 5, 5, 'failed', 0, 0, '{\"image_id\":6,\"from_snapshot_id\":12}'),
                    (5, 'snapshot', 9, 'box', 5, 5, 'succeeded', 0, 0, '{\"snapshot_id\":11}')".into(),
        ] {
            sqlx::query(&sql).execute(&pool).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let rows = |pool: db::Pool| async move {
            sqlx::query_as::<_, (i64, String, String, i64, Option<i64>, String, String, i64, String, i64, Option<i64>)>(
                "SELECT id, name, image_ref, machine_id, parent_id, origin, state, size_bytes, message, created_at, base_image_id FROM snapshots ORDER BY id",
            )
            .fetch_all(&pool)
            .await
            .unwrap()
        };
        let before = rows(pool.clone()).await;
        db::migrate(&pool).await.unwrap();

        assert_eq!(rows(pool.clone()).await, before, "every snapshot keeps its row and id");
        assert_eq!(schema(pool.clone()).await, old_schema, "same columns, foreign keys, unique tag and indexes");
        let count = |sql: &'static str| {
            let pool = pool.clone();
            async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await.unwrap() }
        };
        assert_eq!(count("SELECT COUNT(*) FROM pragma_foreign_key_check").await, 0);
        assert_eq!(count("SELECT foreign_keys FROM pragma_foreign_keys").await, 1, "foreign keys are on again");
        assert_eq!(count("SELECT instr(sql, 'AUTOINCREMENT') > 0 FROM sqlite_master WHERE name = 'snapshots'").await, 1);
        assert_eq!(count("SELECT COUNT(*) FROM sqlite_master WHERE name = 'snapshots_rebuilt'").await, 0);

        // The next snapshot is above every id still held (the image row's
        // 15, not only the rows left, the machine's 9 or the payloads' 12).
        let insert = "INSERT INTO snapshots (name, image_ref, machine_id, machine_name, owner_id, group_id, origin, state, created_at)
                      VALUES ('third', 'pending-x', 9, 'box', 5, 5, 'user', 'creating', 3)";
        sqlx::query(insert).execute(&pool).await.unwrap();
        assert_eq!(count("SELECT MAX(id) FROM snapshots").await, 16);
        assert!(sqlx::query(insert).execute(&pool).await.is_err(), "the tag is unique");
        // A deleted parent still leaves its children without one.
        sqlx::query("DELETE FROM snapshots WHERE id = 3").execute(&pool).await.unwrap();
        assert_eq!(count("SELECT COUNT(*) FROM snapshots WHERE id = 7 AND parent_id IS NULL").await, 1);
        // Deleting the newest does not give its id away.
        sqlx::query("DELETE FROM snapshots WHERE id = 16").execute(&pool).await.unwrap();
        sqlx::query(insert).execute(&pool).await.unwrap();
        assert_eq!(count("SELECT MAX(id) FROM snapshots").await, 17);
        // Running the migrations again changes nothing.
        db::migrate(&pool).await.unwrap();
    }
}
