//! The portal's front page and two layout fixes, as a browser without
//! JavaScript gets them (issue 33, item 12): the dashboard lists the
//! user's own machines with state and current GPU use, warnings, recent
//! tasks and compute tasks, and a link to create a machine; the snapshot
//! name is a one-line field; the cluster heatmap wraps inside its card,
//! with no link inside an image.

use crate::common;

use common::{login, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use gantry_platform::{accounts, policy};
use gantry_testkit::telemetry;
use reqwest::StatusCode;

async fn page(client: &reqwest::Client, server: &TestServer, path: &str) -> String {
    let res = client.get(server.url(path)).header("Accept", "text/html").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{path}");
    res.text().await.unwrap()
}

/// The element that starts at `marker` up to the next `end`.
fn part<'a>(html: &'a str, marker: &str, end: &str) -> &'a str {
    let at = html.find(marker).unwrap_or_else(|| panic!("no {marker} in the page"));
    let rest = &html[at..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

async fn compute_task(server: &TestServer, name: &str, user: &str) {
    let (id, group): (i64, i64) = sqlx::query_as("SELECT id, group_id FROM users WHERE username = ?")
        .bind(user)
        .fetch_one(&server.pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO compute_tasks (name, requester_id, group_id, framework, framework_version, interpreter, interpreter_version, command,
                                    gpu_count, cpu_millis, memory_mb, time_limit_secs, state, created_at, updated_at)
         VALUES (?, ?, ?, 'PyTorch', '2.4', 'Python', '3.11', '[\"true\"]', 1, 1000, 1024, 60, 'pending', 0, 0)",
    )
    .bind(name)
    .bind(id)
    .bind(group)
    .execute(&server.pool)
    .await
    .unwrap();
}

gantry_testkit::timed_test! {
    async fn the_dashboard_shows_the_users_machines_gpu_use_tasks_and_a_way_to_create_one() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        server.add_user("alice", "a-good-password", Role::User).await;
        server.add_user("bob", "b-good-password", Role::User).await;
        let alice = server.client();
        assert_eq!(login(&server, &alice, "alice", "a-good-password").await.status(), StatusCode::OK);

        // Nothing yet: the empty states, the create link, and every part the
        // page had before (user, group, quota).
        let html = page(&alice, &server, "/").await;
        assert!(html.contains(r#"data-testid="dash-no-machines""#), "no machines yet");
        assert!(html.contains(r#"data-testid="dash-no-tasks""#) && html.contains(r#"data-testid="dash-no-compute""#));
        assert!(html.contains(r##"href="/machines#create" data-testid="dash-create""##), "a way to create one");
        assert!(html.contains(r#"data-testid="dash-user">alice<"#) && html.contains(r#"data-testid="dash-group">default<"#));
        assert!(html.contains(r#"data-testid="quota-used""#), "the quota gauge stays");

        // A running machine on a hot simulated GPU (97-100 %), a machine
        // request through the portal, a failed machine, compute tasks — and
        // bob's (same group, so visible to alice in the lists), which are
        // not alice's and stay off her dashboard.
        let c = telemetry::cluster(&server.pool, "alice", "hot", 3).await;
        let default_group = accounts::ensure_default_group(&server.pool).await.unwrap();
        policy::update_group_policy(&server.pool, None, default_group, 4, 8, &[]).await.unwrap();
        let form = [("name", "box-2"), ("image_id", ""), ("gpu_count", "1"), ("gpu_model", ""), ("volume_size_gb", "10")];
        let res = alice.post(server.url("/api/create_machine")).form(&form).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
        sqlx::query("UPDATE machines SET state = 'failed', message = 'container exited with code 137' WHERE name = 'box-2'")
            .execute(&server.pool)
            .await
            .unwrap();
        compute_task(&server, "train-a", "alice").await;
        compute_task(&server, "train-b", "bob").await;

        let html = page(&alice, &server, "/").await;
        let machines = part(&html, r#"data-testid="dash-machines""#, "</section>");
        let cooker = part(machines, r#"data-testid="dash-machine" data-name="cooker""#, "</tr>");
        assert!(cooker.contains(r#"data-state="running""#) && cooker.contains(r#"class="badge running">running<"#), "{cooker}");
        assert!(cooker.contains(&format!(r#"href="/machines/{}""#, c.machine_id)), "{cooker}");
        let used = part(cooker, r#"data-testid="dash-gpu-use">"#, "</td>");
        let pct: i64 = used.trim_start_matches(r#"data-testid="dash-gpu-use">"#).trim_end_matches(" %").parse().unwrap_or_else(|_| panic!("{used}"));
        assert!((97..=100).contains(&pct), "a hot GPU's current use: {used}");
        let failed = part(machines, r#"data-testid="dash-machine" data-name="box-2""#, "</tr>");
        assert!(failed.contains(r#"data-state="failed""#), "{failed}");
        assert!(part(failed, r#"data-testid="dash-machine-warning""#, "</div>").contains(">container exited with code 137"), "a warning that needs alice: {failed}");
        let tasks = part(&html, r#"data-testid="dash-tasks""#, "</section>");
        assert!(tasks.contains(r#"data-testid="dash-task" data-kind="create""#) && tasks.contains("box-2"), "{tasks}");
        let compute = part(&html, r#"data-testid="dash-compute""#, "</section>");
        assert!(compute.contains(r#"data-name="train-a""#) && !compute.contains("train-b"), "only alice's: {compute}");
        assert!(html.contains(r##"href="/machines#create""##));

        // /machines has the anchor the link goes to.
        let machines_page = page(&alice, &server, "/machines").await;
        assert!(machines_page.contains(r#"<section id="create" class="card">"#), "the create form's anchor");

        // Bob sees his compute task, not alice's machines.
        let bob = server.client();
        assert_eq!(login(&server, &bob, "bob", "b-good-password").await.status(), StatusCode::OK);
        let html = page(&bob, &server, "/").await;
        assert!(!html.contains(r#"data-name="cooker""#) && html.contains(r#"data-name="train-b""#));
    }
}

gantry_testkit::timed_test! {
    async fn the_snapshot_name_is_one_line_and_the_heatmap_wraps_without_nested_links() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let c = telemetry::cluster(&server.pool, "admin", "training", 3).await;
        let admin = server.client();
        assert_eq!(login(&server, &admin, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);

        // A one-line text field in a row label (the label's column made the
        // field's flex-basis its height: 8rem tall).
        let html = page(&admin, &server, &format!("/machines/{}", c.machine_id)).await;
        let card = part(&html, r#"data-testid="machine-snapshots""#, "</section>");
        let field = part(card, r#"<label class="inline-field">"#, "</label>");
        assert!(field.contains(r#"<input type="text" name="name""#) && field.contains(r#"data-testid="snapshot-name""#), "{field}");
        assert!(!card.contains("<textarea"), "{card}");
        let css = include_str!("../../../style/main.css");
        assert!(css.contains("form.inline > label, label.inline-field { flex-direction: row;"), "the label lays out in a row");

        // The heatmap: HTML cells that wrap (no fixed-width SVG), the node's
        // name a link beside its cells, nothing interactive inside an image.
        let html = page(&admin, &server, "/admin/overview").await;
        let map = part(&html, r#"data-testid="heatmap""#, "</section>");
        assert!(!map.contains("<svg") && !map.contains(r#"role="img""#), "{map}");
        assert_eq!(map.matches(r#"class="heat-cell""#).count(), 2);
        let link = part(map, "<a ", ">");
        assert!(link.contains(&format!(r#"href="/admin/nodes/{}""#, c.node_id)) && link.contains(r#"class="heat-node-name""#), "{map}");
        assert_eq!(map.matches("<a ").count(), 1, "one link, the node's: {map}");
        assert!(css.contains(".heat-cells { display: flex; flex-wrap: wrap;"), "cells wrap to the card's width");
    }
}
