//! The list pages' per-state counts come from `machine_counts` and
//! `task_counts`, kept by triggers (migration 0014), and
//! `compute_task_counts` (migration 0027). Every way a row can
//! change — insert, state change, a move to another group or person, a
//! different kind, delete — must leave the tables equal to counting the
//! rows. The engine's property test checks the same after every step.

use gantry_platform::{accounts, db::Pool, images};
use gantry_testkit::install::Install;
use rand::{rngs::StdRng, Rng, SeedableRng};

type Counted = Vec<(i64, i64, String, String, i64)>;

/// The count tables equal a `GROUP BY` of the rows (zero rows aside).
pub async fn assert_counts_agree(pool: &Pool, after: &str) {
    let pairs = [
        (
            "SELECT group_id, owner_id, workload, state, n FROM machine_counts WHERE n <> 0 ORDER BY 1, 2, 3, 4",
            "SELECT group_id, owner_id, workload, state, COUNT(*) FROM machines GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        ),
        (
            "SELECT group_id, requester_id, kind, state, n FROM task_counts WHERE n <> 0 ORDER BY 1, 2, 3, 4",
            "SELECT group_id, requester_id, kind, state, COUNT(*) FROM tasks GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        ),
        (
            "SELECT group_id, requester_id, 'compute', state, n FROM compute_task_counts WHERE n <> 0 ORDER BY 1, 2, 3, 4",
            "SELECT group_id, requester_id, 'compute', state, COUNT(*) FROM compute_tasks GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        ),
    ];
    for (kept, counted) in pairs {
        let kept: Counted = sqlx::query_as(kept).fetch_all(pool).await.unwrap();
        let counted: Counted = sqlx::query_as(counted).fetch_all(pool).await.unwrap();
        assert_eq!(kept, counted, "after {after}: the count table disagrees with the rows");
    }
}

const MACHINE_STATES: [&str; 5] = ["creating", "running", "stopped", "deleted", "failed"];
const TASK_STATES: [&str; 4] = ["pending", "running", "succeeded", "failed"];
const KINDS: [&str; 3] = ["create", "restart", "delete"];

gantry_testkit::timed_test! {
    limit = 60;
    async fn count_tables_follow_every_change_to_machines_and_tasks() {
        let Install { dir: _dir, pool } = Install::new().await;
        images::ensure_default_image(&pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
        let image: i64 = sqlx::query_scalar("SELECT id FROM images LIMIT 1").fetch_one(&pool).await.unwrap();
        accounts::create_group(&pool, None, "g1", 8).await.unwrap();
        accounts::create_group(&pool, None, "g2", 8).await.unwrap();
        let mut people = Vec::new();
        for (user, group) in [("ann", "g1"), ("ben", "g1"), ("cat", "g2")] {
            let u = accounts::create_user(&pool, None, accounts::NewUser { username: user, password: "password-123", role: gantry_core::Role::User, group: Some(group) })
                .await
                .unwrap();
            people.push((u.id, u.group_id));
        }
        let mut rng = StdRng::seed_from_u64(14);
        let mut made = 0;
        for step in 0..400 {
            let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM machines").fetch_all(&pool).await.unwrap();
            let task_ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM tasks").fetch_all(&pool).await.unwrap();
            let (uid, gid) = people[rng.gen_range(0..people.len())];
            let what = match rng.gen_range(0..8) {
                0 | 1 => {
                    made += 1;
                    let state = MACHINE_STATES[rng.gen_range(0..MACHINE_STATES.len())];
                    let id: i64 = sqlx::query_scalar(
                        "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, volume_name, volume_size_gb, state, workload, created_at, updated_at)
                         VALUES (?, ?, ?, ?, 1, 'SIM', ?, 1, ?, ?, 0, 0) RETURNING id",
                    )
                    .bind(format!("m{made}"))
                    .bind(uid)
                    .bind(gid)
                    .bind(image)
                    .bind(format!("vol-{made}"))
                    .bind(state)
                    .bind(if rng.gen_bool(0.8) { "dev" } else { "job" })
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                    let kind = KINDS[rng.gen_range(0..KINDS.len())];
                    sqlx::query("INSERT INTO tasks (kind, machine_id, machine_name, requester_id, group_id, state, created_at, updated_at) VALUES (?, ?, 'm', ?, ?, 'pending', 0, 0)")
                        .bind(kind)
                        .bind(id)
                        .bind(uid)
                        .bind(gid)
                        .execute(&pool)
                        .await
                        .unwrap();
                    "insert"
                }
                2 if !ids.is_empty() => {
                    // Every live state may be set, also to the one it has (no change).
                    let state = MACHINE_STATES[rng.gen_range(0..MACHINE_STATES.len())];
                    let id = ids[rng.gen_range(0..ids.len())];
                    sqlx::query("UPDATE machines SET state = ?, updated_at = 1 WHERE id = ?").bind(state).bind(id).execute(&pool).await.unwrap();
                    "machine state"
                }
                3 if !ids.is_empty() => {
                    let id = ids[rng.gen_range(0..ids.len())];
                    sqlx::query("UPDATE machines SET owner_id = ?, group_id = ? WHERE id = ?").bind(uid).bind(gid).bind(id).execute(&pool).await.unwrap();
                    "machine moved"
                }
                4 if !task_ids.is_empty() => {
                    let state = TASK_STATES[rng.gen_range(0..TASK_STATES.len())];
                    let id = task_ids[rng.gen_range(0..task_ids.len())];
                    sqlx::query("UPDATE tasks SET state = ?, progress = 50 WHERE id = ?").bind(state).bind(id).execute(&pool).await.unwrap();
                    "task state"
                }
                5 if !task_ids.is_empty() => {
                    let id = task_ids[rng.gen_range(0..task_ids.len())];
                    let kind = KINDS[rng.gen_range(0..KINDS.len())];
                    sqlx::query("UPDATE tasks SET kind = ?, requester_id = ?, group_id = ? WHERE id = ?").bind(kind).bind(uid).bind(gid).bind(id).execute(&pool).await.unwrap();
                    "task changed"
                }
                6 if !task_ids.is_empty() => {
                    let id = task_ids[rng.gen_range(0..task_ids.len())];
                    sqlx::query("DELETE FROM tasks WHERE id = ?").bind(id).execute(&pool).await.unwrap();
                    "task deleted"
                }
                7 if !ids.is_empty() => {
                    let id = ids[rng.gen_range(0..ids.len())];
                    let mut tx = pool.begin().await.unwrap();
                    sqlx::query("DELETE FROM tasks WHERE machine_id = ?").bind(id).execute(&mut *tx).await.unwrap();
                    sqlx::query("DELETE FROM machines WHERE id = ?").bind(id).execute(&mut *tx).await.unwrap();
                    tx.commit().await.unwrap();
                    "machine deleted"
                }
                _ => "nothing",
            };
            assert_counts_agree(&pool, &format!("step {step} ({what})")).await;
        }
        let machines: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM machines").fetch_one(&pool).await.unwrap();
        assert!(machines > 20, "the walk left machines to count ({machines})");
    }
}
