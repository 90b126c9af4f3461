//! A list page costs the same with 50 or 50,000 rows behind it only if
//! every window walks an index in id order and stops after one page. This
//! asks SQLite for the plan of every combination of viewer (admin, member)
//! and filters (state, person, group, task kind) of the machines, tasks and
//! compute tasks lists: no plan may sort the matching rows (`USE TEMP
//! B-TREE`), and only an admin's list with nothing set may walk the whole
//! table (newest first, so it still stops early).

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, User},
    compute::compute_ids_sql,
    db::Pool,
    machines::{machine_ids_sql, recent_tasks_sql, task_ids_sql, ListFilter},
};
use gantry_testkit::install::Install;

type PlanRow = (i64, i64, i64, String);

async fn plan(pool: &Pool, sql: &str, binds: (i64, &ListFilter)) -> Vec<String> {
    let (visibility, f) = binds;
    let mut q = sqlx::query_as::<_, PlanRow>(sql).bind(visibility).bind(&f.user).bind(&f.group);
    if sql.contains("?7") {
        q = q.bind(&f.kind);
    }
    q.bind(&f.state).bind(50_i64).bind(0_i64).fetch_all(pool).await.unwrap().into_iter().map(|r| r.3).collect()
}

fn filters(with_kind: bool) -> Vec<ListFilter> {
    let mut out = Vec::new();
    for bits in 0..16u8 {
        if !with_kind && bits & 8 != 0 {
            continue;
        }
        let set = |bit: u8, v: &str| (bits & bit != 0).then(|| v.to_string());
        out.push(ListFilter {
            state: set(1, "running"),
            user: set(2, "ann"),
            group: set(4, "g1"),
            kind: set(8, "create"),
        });
    }
    out
}

fn check(who: &User, f: &ListFilter, table: &str, steps: &[String]) {
    let narrowed =
        !who.role.is_admin() || f.state.is_some() || f.user.is_some() || f.group.is_some() || f.kind.is_some();
    let context = format!("{table} window for {} with {f:?}: {steps:?}", who.username);
    assert!(!steps.iter().any(|s| s.contains("TEMP B-TREE")), "sorts every matching row: {context}");
    if narrowed {
        assert!(!steps.iter().any(|s| s == &format!("SCAN {}", &table[..1])), "reads the whole table: {context}");
    }
}

/// A fresh database with an admin (`root`) and a member (`ann`) of `g1`.
async fn admin_and_member() -> (tempfile::TempDir, Pool, Vec<User>) {
    let Install { dir, pool } = Install::new().await;
    accounts::create_group(&pool, None, "g1", 8).await.unwrap();
    let mut people = Vec::new();
    for (name, role) in [("root", Role::Admin), ("ann", Role::User)] {
        let new = accounts::NewUser { username: name, password: "password-123", role, group: Some("g1") };
        people.push(accounts::create_user(&pool, None, new).await.unwrap());
    }
    (dir, pool, people)
}

gantry_testkit::timed_test! {
    async fn every_list_window_walks_an_index_in_id_order() {
        let (_dir, pool, people) = admin_and_member().await;
        let mut checked = 0;
        for who in &people {
            for f in filters(false) {
                let (sql, bind) = machine_ids_sql(who, &f);
                let steps = plan(&pool, &format!("EXPLAIN QUERY PLAN {sql}"), (bind, &f)).await;
                check(who, &f, "machines", &steps);
                checked += 1;
            }
            for f in filters(true) {
                let (sql, bind) = task_ids_sql(who, &f);
                let steps = plan(&pool, &format!("EXPLAIN QUERY PLAN {sql}"), (bind, &f)).await;
                check(who, &f, "tasks", &steps);
                checked += 1;
            }
            for f in filters(false) {
                let (sql, bind) = compute_ids_sql(who, &f);
                let steps = plan(&pool, &format!("EXPLAIN QUERY PLAN {sql}"), (bind, &f)).await;
                check(who, &f, "compute_tasks", &steps);
                checked += 1;
            }
        }
        assert_eq!(checked, 2 * (8 + 16 + 8));
    }
}

gantry_testkit::timed_test! {
    async fn a_machines_task_history_reads_only_that_machines_tasks() {
        let (_dir, pool, people) = admin_and_member().await;
        for who in &people {
            let (sql, bind) = recent_tasks_sql(who, true);
            let steps: Vec<String> = sqlx::query_as::<_, PlanRow>(&format!("EXPLAIN QUERY PLAN {sql}"))
                .bind(bind)
                .bind(7_i64)
                .bind(20_i64)
                .fetch_all(&pool)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.3)
                .collect();
            let context = format!("{}: {steps:?}", who.username);
            assert!(steps.iter().any(|s| s.contains("tasks_machine")), "does not use the machine's index: {context}");
            assert!(!steps.iter().any(|s| s.contains("TEMP B-TREE") || s == "SCAN t"), "reads or sorts beyond the machine's tasks: {context}");
        }
    }
}
