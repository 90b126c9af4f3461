//! The compute tasks list is a window like the machines and tasks lists:
//! one page of rows newest first, filters that narrow what the viewer may
//! see and never widen it, and per-state counts that come from
//! `compute_task_counts` and follow every change to the rows.

use crate::list_counts::assert_counts_agree;
use gantry_core::{paging::PageRequest, Role};
use gantry_platform::{
    accounts::{self, User},
    compute::{compute_window, ComputeTaskView},
    db::Pool,
    machines::{ListFilter, Window},
};
use gantry_testkit::install::Install;

const STATES: [&str; 4] = ["pending", "running", "succeeded", "failed"];

/// `n` tasks of `who`, states in turn, written straight into the table.
async fn seed(pool: &Pool, who: &User, n: usize) {
    for i in 0..n {
        sqlx::query(
            "INSERT INTO compute_tasks (name, requester_id, group_id, framework, framework_version, interpreter, interpreter_version, command,
                                        gpu_count, cpu_millis, memory_mb, time_limit_secs, state, created_at, updated_at)
             VALUES (?, ?, ?, 'PyTorch', '2.4', 'Python', '3.11', '[\"true\"]', 1, 1000, 1024, 60, ?, 0, 0)",
        )
        .bind(format!("{}-{i}", who.username))
        .bind(who.id)
        .bind(who.group_id)
        .bind(STATES[i % STATES.len()])
        .execute(pool)
        .await
        .unwrap();
    }
}

async fn window(pool: &Pool, who: &User, filter: ListFilter, page: i64) -> Window<ComputeTaskView> {
    compute_window(pool, who, &filter, PageRequest { page, per_page: 50 }).await.unwrap()
}

fn by(state: Option<&str>, user: Option<&str>, group: Option<&str>) -> ListFilter {
    ListFilter { state: state.map(Into::into), user: user.map(Into::into), group: group.map(Into::into), kind: None }
}

/// Every row newest first, by one of `people`, in `state` when given.
fn assert_rows(w: &Window<ComputeTaskView>, people: &[&str], state: Option<&str>) {
    assert!(w.rows.windows(2).all(|p| p[0].id > p[1].id), "newest first");
    for t in &w.rows {
        assert!(
            people.contains(&t.requester.as_str()),
            "task #{} of {} is not the viewer's to see here",
            t.id,
            t.requester
        );
        assert!(state.is_none_or(|s| s == t.state.as_str()), "task #{} is {}", t.id, t.state);
    }
}

gantry_testkit::timed_test! {
    limit = 60;
    async fn compute_window_pages_filters_and_counts_inside_the_viewers_group() {
        let Install { dir: _dir, pool } = Install::new().await;
        accounts::create_group(&pool, None, "g1", 8).await.unwrap();
        accounts::create_group(&pool, None, "g2", 8).await.unwrap();
        let mut people = Vec::new();
        for (name, role, group) in [("root", Role::Admin, "g1"), ("ann", Role::User, "g1"), ("ben", Role::User, "g1"), ("cat", Role::User, "g2")] {
            people.push(accounts::create_user(&pool, None, accounts::NewUser { username: name, password: "password-123", role, group: Some(group) }).await.unwrap());
        }
        let (root, ann, ben, cat) = (&people[0], &people[1], &people[2], &people[3]);
        seed(&pool, ann, 70).await;
        seed(&pool, cat, 30).await;
        seed(&pool, ben, 10).await;

        // A member: one page of the group's 80, then the other 30.
        let first = window(&pool, ann, ListFilter::default(), 1).await;
        assert_eq!((first.rows.len(), first.total), (50, 80), "one page of the group's tasks");
        assert_rows(&first, &["ann", "ben"], None);
        assert_eq!(first.rows[0].name, "ben-9", "the newest first");
        assert_eq!(first.by_state, vec![("failed".into(), 19), ("pending".into(), 21), ("running".into(), 21), ("succeeded".into(), 19)]);
        let second = window(&pool, ann, ListFilter::default(), 2).await;
        assert_eq!(second.rows.len(), 30);
        assert_eq!(second.rows.last().unwrap().name, "ann-0", "the oldest on the last page");

        // Filters narrow; they never widen a member's view.
        let failed = window(&pool, ann, by(Some("failed"), None, None), 1).await;
        assert_eq!((failed.rows.len(), failed.total), (19, 19));
        assert_rows(&failed, &["ann", "ben"], Some("failed"));
        assert_eq!(failed.by_state.len(), 4, "the state links keep every state's count");
        let bens = window(&pool, ann, by(None, Some("ben"), None), 1).await;
        assert_eq!((bens.rows.len(), bens.total), (10, 10));
        assert_rows(&bens, &["ben"], None);
        for f in [by(None, Some("cat"), None), by(None, None, Some("g2"))] {
            let w = window(&pool, ann, f, 1).await;
            assert_eq!((w.rows.len(), w.total), (0, 0), "another group's tasks stay hidden");
        }

        // An admin sees every group and may narrow by group, person and state.
        assert_eq!(window(&pool, root, ListFilter::default(), 1).await.total, 110);
        let g2 = window(&pool, root, by(None, None, Some("g2")), 1).await;
        assert_eq!((g2.rows.len(), g2.total), (30, 30));
        assert_rows(&g2, &["cat"], None);
        let running = window(&pool, root, by(Some("running"), Some("cat"), None), 1).await;
        assert_eq!(running.total, 8);
        assert_rows(&running, &["cat"], Some("running"));

        // The counts follow inserts, state changes, moves and deletes.
        assert_counts_agree(&pool, "seeding").await;
        sqlx::query("UPDATE compute_tasks SET state = 'cancelled' WHERE state = 'pending' AND requester_id = ?").bind(ann.id).execute(&pool).await.unwrap();
        assert_counts_agree(&pool, "cancelling").await;
        sqlx::query("UPDATE compute_tasks SET requester_id = ?, group_id = ? WHERE name = 'ann-1'").bind(cat.id).bind(cat.group_id).execute(&pool).await.unwrap();
        assert_counts_agree(&pool, "a move").await;
        sqlx::query("DELETE FROM compute_tasks WHERE name = 'ben-0'").execute(&pool).await.unwrap();
        assert_counts_agree(&pool, "a delete").await;
        let now = window(&pool, ann, ListFilter::default(), 1).await;
        assert_eq!(now.total, 78, "one moved away, one deleted");
        assert!(now.by_state.contains(&("cancelled".into(), 18)) && now.by_state.contains(&("pending".into(), 2)), "{:?}", now.by_state);
        assert_eq!(window(&pool, cat, ListFilter::default(), 1).await.total, 31);
    }
}

gantry_testkit::timed_test! {
    async fn lists_carry_only_the_end_of_each_tasks_output_and_the_task_carries_it_whole() {
        use gantry_platform::compute::{self, LIST_TAIL_CHARS};
        let Install { dir: _dir, pool } = Install::new().await;
        accounts::create_group(&pool, None, "g1", 8).await.unwrap();
        let ann = accounts::create_user(&pool, None, accounts::NewUser { username: "ann", password: "password-123", role: Role::User, group: Some("g1") }).await.unwrap();
        seed(&pool, &ann, 3).await;
        // A whole kept tail (64 KiB, what the watcher keeps) ending in a mark.
        let tail = format!("{}THE-END", "é".repeat(65_536));
        sqlx::query("UPDATE compute_tasks SET logs_tail = ?").bind(&tail).execute(&pool).await.unwrap();

        let listed = compute::list_compute_tasks(&pool, &ann, None, 500).await.unwrap();
        assert_eq!(listed.len(), 3);
        let page = window(&pool, &ann, ListFilter::default(), 1).await;
        for t in listed.iter().chain(page.rows.iter()) {
            assert_eq!(t.logs_tail.chars().count(), LIST_TAIL_CHARS, "a list carries the end only");
            assert!(t.logs_tail.ends_with("THE-END"));
        }
        let one = compute::compute_task(&pool, &ann, listed[0].id).await.unwrap();
        assert_eq!(one.logs_tail, tail, "the task itself carries its kept output whole");
    }
}
