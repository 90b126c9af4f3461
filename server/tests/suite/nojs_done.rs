//! Forms without JavaScript: a server function that succeeds sends the
//! browser back to the form's page, and that page says it worked — in the
//! server's words only, whatever a link's query carries. The outcome is kept
//! in the poster's session (one-time messages), never in the URL: it is
//! shown once, and to that session only.

use crate::common;

use common::{count, login, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use gantry_platform::{
    accounts,
    cluster::{self, NodeRegistration},
    gpus::{self, SimulatedGpus},
    images, policy,
};
use reqwest::{header, StatusCode};

/// What a browser without JavaScript accepts (server functions redirect it).
const HTML: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/// A simulated node and the default image, with room for a machine.
async fn cluster(server: &TestServer) {
    let found = gpus::simulated("node-a", &SimulatedGpus { count: 2, model: "SIM-A100".into(), memory_mb: 1024 });
    let registration = NodeRegistration {
        name: "node-a",
        region_code: "local",
        docker_endpoint: "simulated://node-a",
        volume_dir: "",
        executor: "simulated",
        cpu_count: 4,
        memory_mb: 0,
        gpus: &found,
    };
    cluster::register_node(&server.pool, registration).await.unwrap();
    images::create_image(&server.pool, None, "devbox", "gantry/devbox:latest", "demo", true).await.unwrap();
    let default_group = accounts::ensure_default_group(&server.pool).await.unwrap();
    policy::update_group_policy(&server.pool, None, default_group, 2, 2, &[]).await.unwrap();
}

fn absolute(server: &TestServer, location: &str) -> String {
    if location.starts_with('/') {
        server.url(location)
    } else {
        location.to_string()
    }
}

/// GETs `url`, following the server's own redirects; the final page's HTML.
async fn page(server: &TestServer, client: &reqwest::Client, url: &str) -> String {
    let mut url = url.to_string();
    for _ in 0..3 {
        let res = client.get(&url).send().await.unwrap();
        if !res.status().is_redirection() {
            assert_eq!(res.status(), StatusCode::OK, "{url}");
            return res.text().await.unwrap();
        }
        url = absolute(server, res.headers()[header::LOCATION].to_str().unwrap());
    }
    panic!("{url}: too many redirects");
}

/// Posts `form` as a form without JavaScript on `from` does: the redirect's
/// target (absolute) and the page there.
async fn post_without_js(
    server: &TestServer,
    client: &reqwest::Client,
    function: &str,
    from: &str,
    form: &[(&str, &str)],
) -> (String, String) {
    let res = client
        .post(server.url(&format!("/api/{function}")))
        .header(header::ACCEPT, HTML)
        .header(header::REFERER, absolute(server, from))
        .form(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FOUND, "{function} redirects back");
    let back = absolute(server, res.headers()[header::LOCATION].to_str().unwrap());
    let html = page(server, client, &back).await;
    (back, html)
}

/// The group policy form's fields, as the page posts them.
fn group_policy<'a>(group: &'a str, gpu_quota: &'a str, rev: &'a str) -> [(&'static str, &'a str); 5] {
    [
        ("group_id", group),
        ("gpu_quota", gpu_quota),
        ("max_gpus_per_machine", "2"),
        ("allowed_models", ""),
        ("policy_rev", rev),
    ]
}

/// The text of the page's "it worked" line, tags and hydration markers left out.
fn done_line(html: &str) -> Option<String> {
    let at = html.find(r#"data-testid="nojs-done""#)?;
    let start = at + html[at..].find('>')? + 1;
    let end = start + html[start..].find("</p>")?;
    let mut text = String::new();
    let mut in_tag = false;
    for c in html[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    Some(text)
}

gantry_testkit::timed_test! {
    async fn a_form_without_javascript_that_worked_says_so_on_the_page_it_returns_to() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        cluster(&server).await;
        let pool = &server.pool;
        let group = accounts::create_group(pool, None, "ml", 16).await.unwrap().id.to_string();
        server.add_user("erin", "erins-password", Role::User).await;
        let erin = count(pool, "SELECT id FROM users WHERE username = 'erin'").await.to_string();
        let admin = server.client();
        assert_eq!(login(&server, &admin, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);
        let rev = || async { count(pool, &format!("SELECT policy_rev FROM groups WHERE id = {group}")).await.to_string() };

        let saved = rev().await;
        let form = group_policy(&group, "8", &saved);
        let (groups_done, html) = post_without_js(&server, &admin, "admin/update_group", "/admin/groups", &form).await;
        // The page shows the function's own answer (kept in the session)
        // instead of the fixed line; the URL carries nothing.
        assert_eq!(groups_done, server.url("/admin/groups"));
        assert!(html.contains(r#"data-testid="group-saved""#) && html.contains("Saved group <strong>ml</strong>"), "{groups_done}");
        assert_eq!(done_line(&html), None, "{groups_done}");
        assert_eq!(count(pool, &format!("SELECT gpu_quota FROM groups WHERE id = {group}")).await, 8);

        let (back, html) = post_without_js(&server, &admin, "admin/reset_password", "/admin", &[("user_id", &erin), ("password", "temporary-pass-1")]).await;
        assert!(html.contains("erin has a temporary password; they must change it at their next sign-in"), "{back}");

        let machine = [("name", "box1"), ("image_id", ""), ("gpu_count", "1"), ("gpu_model", ""), ("volume_size_gb", "1")];
        let (back, html) = post_without_js(&server, &admin, "create_machine", "/machines", &machine).await;
        assert!(html.contains(r#"data-testid="create-ok""#) && html.contains("<strong>box1</strong>"), "{back}");
        assert_eq!(count(pool, "SELECT COUNT(*) FROM machines WHERE name = 'box1'").await, 1);

        // A refusal from the page that still says the last save worked shows the refusal only.
        let form = group_policy(&group, "4", &saved);
        let (back, html) = post_without_js(&server, &admin, "admin/update_group", &groups_done, &form).await;
        assert!(html.contains(r#"data-testid="form-error""#) && html.contains("was changed by someone else"), "{back}");
        assert_eq!(done_line(&html), None, "{back}");

        // A form that carries its own result (the new token) gets no second line.
        let (back, html) = post_without_js(&server, &admin, "create_token", "/tokens", &[("name", "ci"), ("password", ADMIN_PASSWORD)]).await;
        assert_eq!(done_line(&html), None, "{back}");

        // With JavaScript the action's answer is the data; no redirect, no marker.
        let current = rev().await;
        let form = group_policy(&group, "6", &current);
        let res = admin.post(server.url("/api/admin/update_group")).header(header::REFERER, server.url("/admin/groups")).form(&form).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.headers().get(header::LOCATION).is_none());
        assert!(res.text().await.unwrap().contains("\"gpu_quota\":6"));
    }
}

gantry_testkit::timed_test! {
    async fn a_link_says_nothing_and_an_outcome_is_shown_once_to_its_own_session_only() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let group = accounts::create_group(&server.pool, None, "ml", 16).await.unwrap().id.to_string();
        let admin = server.client();
        assert_eq!(login(&server, &admin, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);
        server.add_user("root2", "second-admin-pw", Role::Admin).await;
        let other = server.client();
        assert_eq!(login(&server, &other, "root2", "second-admin-pw").await.status(), StatusCode::OK);

        let forged = [
            "/admin/groups?done=admin/update_group",
            "/admin/groups?%64one=admin/update_group",
            "/admin/groups?done=admin%2Fupdate_group&__dsig=00000000000000000000000000000000",
            "/admin/groups?done=Your%20account%20is%20locked%2C%20call%20555-0100",
            "/admin/groups?done=%3Cb%3EYour%20account%20is%20locked%3C%2Fb%3E&__dsig=x&done=admin/create_group",
            "/admin/groups?done=admin/update_group&answer=%7B%22name%22%3A%22Your%20account%20is%20locked%22%7D",
        ];
        for url in forged {
            let html = page(&server, &admin, &server.url(url)).await;
            assert_eq!(done_line(&html), None, "{url}");
            assert!(!html.contains("account is locked") && !html.contains("group-saved"), "{url}");
        }

        let rev = count(&server.pool, &format!("SELECT policy_rev FROM groups WHERE id = {group}")).await.to_string();
        let form = group_policy(&group, "8", &rev);
        let (back, html) = post_without_js(&server, &admin, "admin/update_group", "/admin/groups", &form).await;
        assert!(html.contains("Saved group <strong>ml</strong>"), "{back}");
        // Shown once: the next view of the page says nothing more.
        let again = page(&server, &admin, &back).await;
        assert!(!again.contains("group-saved"), "an outcome is shown twice");
        // Another session following the same link learns nothing.
        let rev = count(&server.pool, &format!("SELECT policy_rev FROM groups WHERE id = {group}")).await.to_string();
        let form = group_policy(&group, "9", &rev);
        let res = admin
            .post(server.url("/api/admin/update_group"))
            .header(header::ACCEPT, HTML)
            .header(header::REFERER, server.url("/admin/groups"))
            .form(&form)
            .send()
            .await
            .unwrap();
        let location = absolute(&server, res.headers()[header::LOCATION].to_str().unwrap());
        let theirs = page(&server, &other, &location).await;
        assert!(!theirs.contains("group-saved"), "another session was shown the answer");
        let mine = page(&server, &admin, &location).await;
        assert!(mine.contains("Saved group <strong>ml</strong>"), "the poster's own page lost its answer");
    }
}

gantry_testkit::timed_test! {
    async fn a_password_changed_without_javascript_is_said_by_its_outcome_not_a_bare_link() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        accounts::create_user(&server.pool, None, accounts::NewUser { username: "erin", password: "erin-first-1", role: Role::User, group: None }).await.unwrap();
        let erin = server.client();
        assert_eq!(login(&server, &erin, "erin", "erin-first-1").await.status(), StatusCode::OK);
        // A bare link claimed it before (`?changed=1`).
        let html = page(&server, &erin, &server.url("/account/password?changed=1")).await;
        assert!(!html.contains("password is changed"), "a link alone says the password changed");

        let form = [("current", "erin-first-1"), ("new", "erin-second-2"), ("repeat", "erin-second-2")];
        let (back, html) = post_without_js(&server, &erin, "change_password", "/account/password", &form).await;
        assert_eq!(back, server.url("/account/password"));
        assert!(html.contains(r#"data-testid="password-changed""#), "{back}");
        assert!(!page(&server, &erin, &back).await.contains("password-changed"), "said twice");
    }
}
