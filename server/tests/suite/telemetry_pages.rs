//! The chart pages over HTTP, as a browser without JavaScript gets them:
//! the machine page's SVG charts with data and thresholds, the node page,
//! the cluster overview, and who may open what.

use crate::common;
use crate::security_support;
use gantry_testkit::telemetry;

use common::{login, TestServer, ADMIN_PASSWORD};
use gantry_core::Role;
use reqwest::StatusCode;

async fn page(client: &reqwest::Client, url: String) -> (StatusCode, String) {
    let res = client.get(url).header("Accept", "text/html").send().await.unwrap();
    (res.status(), res.text().await.unwrap())
}

/// The value of `attr` on the element that has `marker`.
fn attr_after(html: &str, marker: &str, attr: &str) -> String {
    let at = html.find(marker).unwrap_or_else(|| panic!("no {marker} in the page"));
    let tag_start = html[..at].rfind('<').unwrap();
    let tag = &html[tag_start..tag_start + html[tag_start..].find('>').unwrap()];
    let key = format!("{attr}=\"");
    let v = &tag[tag.find(&key).unwrap_or_else(|| panic!("no {attr} in {tag}")) + key.len()..];
    v[..v.find('"').unwrap()].to_string()
}

gantry_testkit::timed_test! {
    async fn the_machine_page_renders_its_gpu_charts_without_javascript() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let c = telemetry::cluster(&server.pool, "admin", "training", 90).await;
        let admin = server.client();
        assert_eq!(login(&server, &admin, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);

        let (status, html) = page(&admin, server.url(&format!("/machines/{}", c.machine_id))).await;
        assert_eq!(status, StatusCode::OK);
        let points: usize = attr_after(&html, "data-testid=\"machine-util-chart\"", "data-points").parse().unwrap();
        assert!(points >= 45, "90 passes in 20 s points: {points}");
        assert!(html.contains("data-testid=\"machine-mem-chart\""));
        let svg = html.find("data-testid=\"machine-util-chart\"").and_then(|at| html[at..].find("</svg>").map(|end| &html[at..at + end])).unwrap_or("");
        assert!(svg.contains("<path data-gpu=") && svg.contains("class=\"series\""), "the series is drawn: {svg}");
        assert!(html.contains("data-threshold=\"reclaim\"") && html.contains("data-threshold=\"hot\""));
        assert!(html.contains("reclaim 5%") && html.contains("hot 90%"));
        assert!(html.contains("simulated"));
        assert!(html.contains("data-testid=\"sim-pattern-form\""), "an admin may change the pattern");
        // The machine page also loads the terminal's scripts: none of them
        // may be one the page's CSP refuses.
        let res = admin.get(server.url(&format!("/machines/{}", c.machine_id))).header("Accept", "text/html").send().await.unwrap();
        let csp = res.headers()["content-security-policy"].to_str().unwrap().to_string();
        let scripts = security_support::assert_scripts_carry_the_nonce(&csp, &res.text().await.unwrap());
        assert!(scripts > 0, "the page has its scripts");
        // 7 days read hourly rollups, of which there are none yet.
        let (_, html) = page(&admin, server.url(&format!("/machines/{}?range=7d", c.machine_id))).await;
        assert!(html.contains("data-testid=\"machine-no-data\""), "no hourly rollups yet");

        let (status, html) = page(&admin, server.url(&format!("/admin/nodes/{}", c.node_id))).await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains("Node mnode"));
        assert_eq!(html.matches("class=\"series\"").count(), 4, "two GPUs, utilisation and memory");

        let (status, html) = page(&admin, server.url("/admin/overview")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(html.matches("class=\"heat-cell\"").count(), 2);
        assert!(html.contains("cooker · admin"));
        assert!(html.contains("data-testid=\"held-vs-used\""));
    }
}

gantry_testkit::timed_test! {
    async fn chart_data_is_refused_to_others_and_bad_ranges_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let c = telemetry::cluster(&server.pool, "admin", "idle", 3).await;
        server.add_user("bob", "password-bob-1", Role::User).await;
        let bob = server.client();
        assert_eq!(login(&server, &bob, "bob", "password-bob-1").await.status(), StatusCode::OK);
        let (status, _) = page(&bob, server.url("/admin/overview")).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let res = bob.post(server.url("/api/admin/cluster_overview")).form(&[("period", "24h")]).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        let res = bob.post(server.url("/api/admin/set_sim_pattern")).form(&[("machine_id", c.machine_id.to_string()), ("pattern", "hot".into())]).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);

        let admin = server.client();
        login(&server, &admin, "admin", ADMIN_PASSWORD).await;
        let res = admin.post(server.url("/api/machine_chart")).form(&[("id", c.machine_id.to_string()), ("range", "2y".into())]).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert!(res.text().await.unwrap().contains("unknown chart range"));
        let res = admin.post(server.url("/api/admin/set_sim_pattern")).form(&[("machine_id", c.machine_id.to_string()), ("pattern", "melting".into())]).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        let pattern: Option<String> = sqlx::query_scalar("SELECT sim_pattern FROM machines WHERE id = ?").bind(c.machine_id).fetch_one(&server.pool).await.unwrap();
        assert_eq!(pattern.as_deref(), Some("idle"));
        let res = admin.post(server.url("/api/admin/set_sim_pattern")).form(&[("machine_id", c.machine_id.to_string()), ("pattern", "hot".into())]).send().await.unwrap();
        assert!(res.status().is_success(), "{}", res.status());
        let pattern: Option<String> = sqlx::query_scalar("SELECT sim_pattern FROM machines WHERE id = ?").bind(c.machine_id).fetch_one(&server.pool).await.unwrap();
        assert_eq!(pattern.as_deref(), Some("hot"));
    }
}
