//! A page past the end of a list (an old link, or a page emptied by
//! deletes since) says so and links to the last page, instead of a
//! backwards "Showing 101–5 of 5" and an empty state that says there is
//! nothing at all.

use crate::common;

use common::{login, TestServer};
use gantry_core::Role;
use gantry_platform::{accounts, images};

const PW: &str = "pager-password-1";

/// `n` machines of `owner`, each with one finished task, written straight
/// into the tables.
async fn seed(server: &TestServer, owner: &str, n: i64) {
    let pool = &server.pool;
    let (uid, gid): (i64, i64) =
        sqlx::query_as("SELECT id, group_id FROM users WHERE username = ?").bind(owner).fetch_one(pool).await.unwrap();
    let image: i64 = sqlx::query_scalar("SELECT id FROM images LIMIT 1").fetch_one(pool).await.unwrap();
    for i in 0..n {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, volume_name, volume_size_gb, state, created_at, updated_at)
             VALUES (?, ?, ?, ?, 1, 'SIM', ?, 1, 'running', 0, 0) RETURNING id",
        )
        .bind(format!("m{i}"))
        .bind(uid)
        .bind(gid)
        .bind(image)
        .bind(format!("vol-m{i}"))
        .fetch_one(pool)
        .await
        .unwrap();
        sqlx::query("INSERT INTO tasks (kind, machine_id, machine_name, requester_id, group_id, state, created_at, updated_at) VALUES ('create', ?, ?, ?, ?, 'succeeded', 0, 0)")
            .bind(id)
            .bind(format!("m{i}"))
            .bind(uid)
            .bind(gid)
            .execute(pool)
            .await
            .unwrap();
    }
}

/// The page's text as read, without the markers the renderer puts
/// between adjacent text nodes.
async fn text(client: &reqwest::Client, server: &TestServer, path: &str) -> String {
    let res = client.get(server.url(path)).send().await.unwrap();
    assert_eq!(res.status(), 200, "{path}");
    let html = res.text().await.unwrap().replace("<!>", "");
    let mut out = String::with_capacity(html.len());
    let mut rest = html.as_str();
    while let Some(at) = rest.find("<!--") {
        out.push_str(&rest[..at]);
        rest = rest[at..].find("-->").map_or("", |end| &rest[at + end + 3..]);
    }
    out + rest
}

/// The pager's paragraph.
fn pager(page: &str) -> &str {
    let at = page.find("data-testid=\"pager\"").expect("a pager");
    &page[at..at + page[at..].find("</p>").unwrap()]
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_page_past_the_end_links_back_instead_of_claiming_the_list_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        images::ensure_default_image(&server.pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
        accounts::create_group(&server.pool, None, "team-a", 4).await.unwrap();
        accounts::create_user(&server.pool, None, accounts::NewUser { username: "alice", password: PW, role: Role::User, group: Some("team-a") })
            .await
            .unwrap();
        seed(&server, "alice", 5).await;
        let alice = server.client();
        assert_eq!(login(&server, &alice, "alice", PW).await.status(), 200);

        let first = text(&alice, &server, "/machines").await;
        assert!(pager(&first).contains("Showing 1–5 of 5"), "the first page reads as before: {}", pager(&first));

        let past = text(&alice, &server, "/machines?page=3").await;
        assert!(!past.contains("No machines yet"), "5 machines exist");
        assert!(!past.contains("Showing 101"), "no backwards range");
        let nav = pager(&past);
        assert!(nav.contains("Page 3 is past the end"), "says why it is empty: {nav}");
        assert!(nav.contains("href=\"/machines\"") && nav.contains("go to page 1"), "links to the last page: {nav}");

        let tasks = text(&alice, &server, "/tasks?page=2").await;
        assert!(!tasks.contains("No tasks yet"), "5 tasks exist");
        let nav = pager(&tasks);
        assert!(nav.contains("Page 2 is past the end") && nav.contains("href=\"/tasks\""), "the tasks list says so too: {nav}");

        let admin = server.client();
        assert_eq!(login(&server, &admin, "admin", common::ADMIN_PASSWORD).await.status(), 200);
        let users = text(&admin, &server, "/admin?page=4").await;
        assert!(!users.contains("Showing 151"), "no backwards range on the users list");
        let nav = pager(&users);
        assert!(nav.contains("Page 4 is past the end") && nav.contains("href=\"/admin\""), "the users list links back: {nav}");
    }
}
