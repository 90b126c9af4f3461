//! The machines and tasks lists are windows: one page of rows with filters
//! and per-state counts, the same isolation as everywhere (a user's filter
//! can never widen it), and a clear 400 for a filter value that names no
//! state or kind.

use crate::common;

use common::{login, TestServer};
use gantry_core::Role;
use gantry_platform::{accounts, images};

const PW: &str = "lists-password-1";

/// `n` dev machines of `owner`, alternating running/stopped, and three
/// tasks (create, restart, delete) for each, written straight into the
/// tables: the lists read them like any others.
async fn seed(server: &TestServer, owner: &str, prefix: &str, n: i64) {
    let pool = &server.pool;
    let (uid, gid): (i64, i64) =
        sqlx::query_as("SELECT id, group_id FROM users WHERE username = ?").bind(owner).fetch_one(pool).await.unwrap();
    let image: i64 = sqlx::query_scalar("SELECT id FROM images LIMIT 1").fetch_one(pool).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    for i in 0..n {
        let state = if i % 2 == 0 { "running" } else { "stopped" };
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, volume_name, volume_size_gb, state, created_at, updated_at)
             VALUES (?, ?, ?, ?, 1, 'SIM', ?, 1, ?, 0, 0) RETURNING id",
        )
        .bind(format!("{prefix}{i}"))
        .bind(uid)
        .bind(gid)
        .bind(image)
        .bind(format!("vol-{prefix}{i}"))
        .bind(state)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        for kind in ["create", "restart", "delete"] {
            sqlx::query("INSERT INTO tasks (kind, machine_id, machine_name, requester_id, group_id, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'succeeded', 0, 0)")
                .bind(kind)
                .bind(id)
                .bind(format!("{prefix}{i}"))
                .bind(uid)
                .bind(gid)
                .execute(&mut *tx)
                .await
                .unwrap();
        }
    }
    tx.commit().await.unwrap();
}

async fn page(client: &reqwest::Client, server: &TestServer, path: &str) -> String {
    let res = client.get(server.url(path)).send().await.unwrap();
    assert_eq!(res.status(), 200, "{path}");
    res.text().await.unwrap()
}

fn rows(html: &str, testid: &str) -> usize {
    html.matches(&format!("data-testid=\"{testid}\"")).count()
}

fn total(html: &str) -> i64 {
    let at = html.find("data-testid=\"pager\" data-total=\"").expect("a pager")
        + "data-testid=\"pager\" data-total=\"".len();
    html[at..].split('"').next().unwrap().parse().unwrap()
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn lists_are_windows_with_filters_inside_the_viewers_group() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        images::ensure_default_image(&server.pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
        accounts::create_group(&server.pool, None, "team-a", 4).await.unwrap();
        accounts::create_group(&server.pool, None, "team-b", 4).await.unwrap();
        for (name, group) in [("alice", "team-a"), ("bob", "team-b")] {
            accounts::create_user(&server.pool, None, accounts::NewUser { username: name, password: PW, role: Role::User, group: Some(group) }).await.unwrap();
        }
        seed(&server, "alice", "a-", 120).await;
        seed(&server, "bob", "b-", 30).await;

        let alice = server.client();
        assert_eq!(login(&server, &alice, "alice", PW).await.status(), 200);
        let first = page(&alice, &server, "/machines").await;
        assert_eq!(rows(&first, "machine-row"), 50, "one page of 50, not all 120");
        assert_eq!(total(&first), 120, "bob's machines are not counted");
        assert!(!first.contains("<strong>b-0</strong>"), "nothing of another group");
        assert_eq!(rows(&page(&alice, &server, "/machines?page=3").await, "machine-row"), 20);
        let stopped = page(&alice, &server, "/machines?state=stopped").await;
        assert_eq!(total(&stopped), 60);
        assert!(!stopped.contains("data-state=\"running\""), "only stopped machines");
        // A filter cannot widen what a user sees.
        assert_eq!(total(&page(&alice, &server, "/machines?group=team-b").await), 0);
        assert_eq!(total(&page(&alice, &server, "/machines?user=bob").await), 0);
        // Garbage page numbers are clamped, not errors.
        assert_eq!(rows(&page(&alice, &server, "/machines?page=-7").await, "machine-row"), 50);

        let tasks = page(&alice, &server, "/tasks?kind=restart&page=2").await;
        assert_eq!(total(&tasks), 120);
        assert_eq!(rows(&tasks, "task-row"), 50);
        assert!(!tasks.contains("data-kind=\"create\"") && !tasks.contains("data-kind=\"delete\""), "only restart tasks");

        // A state or kind that does not exist is a 400 naming the choices.
        let res = alice.post(server.url("/api/machines_window")).form(&[("state", "runing")]).send().await.unwrap();
        assert_eq!(res.status(), 400);
        let body = res.text().await.unwrap();
        assert!(body.contains("unknown state \\\"runing\\\"") || body.contains("unknown state \"runing\""), "{body}");
        let res = alice.post(server.url("/api/tasks_window")).form(&[("kind", "explode")]).send().await.unwrap();
        assert_eq!(res.status(), 400);
        // The unfiltered first page, as the hydrated page asks for it: an
        // empty body is a valid request.
        let res = alice.post(server.url("/api/machines_window")).body("").header("content-type", "application/x-www-form-urlencoded").send().await.unwrap();
        assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
        let res = alice.post(server.url("/api/tasks_window")).body("").header("content-type", "application/x-www-form-urlencoded").send().await.unwrap();
        assert_eq!(res.status(), 200);

        // An admin sees every group and may narrow by group and owner.
        let admin = server.client();
        assert_eq!(login(&server, &admin, "admin", common::ADMIN_PASSWORD).await.status(), 200);
        assert_eq!(total(&page(&admin, &server, "/machines").await), 150);
        let team_b = page(&admin, &server, "/machines?group=team-b&state=running").await;
        assert_eq!(total(&team_b), 15);
        assert!(team_b.contains("<strong>b-0</strong>") && !team_b.contains("<strong>a-0</strong>"), "only team-b's running machines");
        assert_eq!(total(&page(&admin, &server, "/tasks?user=bob").await), 90);

        // The reclaim console pages its machines too, newest first.
        let reclaim = page(&admin, &server, "/admin/reclaim").await;
        assert_eq!(rows(&reclaim, "reclaim-machine"), 50, "one page of 50, not all 150");
        assert_eq!(total(&reclaim), 150);
        assert!(reclaim.contains("data-name=\"b-29\"") && !reclaim.contains("data-name=\"a-0\""), "the newest first");
        let last = page(&admin, &server, "/admin/reclaim?page=3").await;
        assert_eq!(rows(&last, "reclaim-machine"), 50);
        assert!(last.contains("data-name=\"a-0\""), "the oldest on the last page");
    }
}

/// `n` compute tasks of `owner` named `{prefix}{i}`, pending, running,
/// succeeded and failed in turn; returns their ids, newest first.
async fn seed_compute(server: &TestServer, owner: &str, prefix: &str, n: usize) -> Vec<i64> {
    let pool = &server.pool;
    let (uid, gid): (i64, i64) =
        sqlx::query_as("SELECT id, group_id FROM users WHERE username = ?").bind(owner).fetch_one(pool).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    let mut ids = Vec::new();
    for i in 0..n {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO compute_tasks (name, requester_id, group_id, framework, framework_version, interpreter, interpreter_version, command,
                                        gpu_count, cpu_millis, memory_mb, time_limit_secs, state, created_at, updated_at)
             VALUES (?, ?, ?, 'PyTorch', '2.4', 'Python', '3.11', '[\"true\"]', 1, 1000, 1024, 60, ?, 0, 0) RETURNING id",
        )
        .bind(format!("{prefix}{i}"))
        .bind(uid)
        .bind(gid)
        .bind(["pending", "running", "succeeded", "failed"][i % 4])
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        ids.push(id);
    }
    tx.commit().await.unwrap();
    ids.reverse();
    ids
}

/// The count shown beside a state's link.
fn state_count(html: &str, state: &str) -> i64 {
    let at = html.find(&format!("data-filter-state=\"{state}\"")).unwrap_or_else(|| panic!("a link for {state}"));
    let count = &html[at..][html[at..].find("class=\"count\">").unwrap() + "class=\"count\">".len()..];
    count.split('<').next().unwrap().parse().unwrap()
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn the_compute_list_is_a_window_with_filters_and_a_pager() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_group(&server.pool, None, "team-a", 4).await.unwrap();
        accounts::create_group(&server.pool, None, "team-b", 4).await.unwrap();
        for (name, group) in [("alice", "team-a"), ("bob", "team-b")] {
            accounts::create_user(&server.pool, None, accounts::NewUser { username: name, password: PW, role: Role::User, group: Some(group) }).await.unwrap();
        }
        let alices = seed_compute(&server, "alice", "a-", 260).await;
        seed_compute(&server, "bob", "b-", 20).await;

        let alice = server.client();
        assert_eq!(login(&server, &alice, "alice", PW).await.status(), 200);
        let second = page(&alice, &server, "/compute?page=2").await;
        assert_eq!(rows(&second, "compute-row"), 50, "one page of 50, not the newest 200");
        for (i, id) in alices.iter().enumerate() {
            let shown = second.contains(&format!("data-id=\"{id}\""));
            assert_eq!(shown, (50..100).contains(&i), "alice's {}th newest task #{id} on page 2", i + 1);
        }
        assert_eq!(total(&second), 260, "bob's tasks are not counted");
        assert!(!second.contains("data-name=\"b-"), "nothing of another group");
        // The pager and the filters are plain links and a GET form.
        assert!(second.contains("href=\"/compute?page=3\"") && second.contains("rel=\"prev\""), "a pager with links");
        assert!(second.contains("action=\"/compute\""), "the filter form");
        assert_eq!(state_count(&second, "failed"), 65);
        assert_eq!(state_count(&second, "pending"), 65);
        let failed = page(&alice, &server, "/compute?state=failed").await;
        assert_eq!(total(&failed), 65);
        assert!(!failed.contains("data-state=\"running\""), "only failed tasks");
        assert_eq!(total(&page(&alice, &server, "/compute?user=bob").await), 0, "a filter cannot widen what a user sees");
        assert!(page(&alice, &server, "/compute?user=nobody").await.contains("No compute task matches these filters"));

        // A state that does not exist is a 400 naming the choices; the
        // unfiltered first page is an empty body.
        let res = alice.post(server.url("/api/compute_window")).form(&[("state", "bogus")]).send().await.unwrap();
        assert_eq!(res.status(), 400);
        assert!(res.text().await.unwrap().contains("pending, scheduled, running"), "names the choices");
        let res = alice.post(server.url("/api/compute_window")).body("").header("content-type", "application/x-www-form-urlencoded").send().await.unwrap();
        assert_eq!(res.status(), 200);

        // An admin sees every group and may narrow by group.
        let admin = server.client();
        assert_eq!(login(&server, &admin, "admin", common::ADMIN_PASSWORD).await.status(), 200);
        assert_eq!(total(&page(&admin, &server, "/compute").await), 280);
        let team_b = page(&admin, &server, "/compute?group=team-b&state=running").await;
        assert_eq!(total(&team_b), 5);
        assert!(team_b.contains("data-name=\"b-1\"") && !team_b.contains("data-name=\"a-"), "only team-b's running tasks");
    }
}
