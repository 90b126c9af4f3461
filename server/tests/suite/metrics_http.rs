//! `/metrics` over HTTP on the real router: the Prometheus text with the
//! sampled GPUs, machines, tasks and quotas, and who may read it.

use crate::common;
use crate::security_support;
use gantry_testkit::telemetry;

use common::TestServer;
use gantry_server::{router, routes::metrics, security::Security};

async fn node_with_a_hot_machine(server: &TestServer) {
    telemetry::cluster(&server.pool, "admin", "hot", 1).await;
}

fn value(text: &str, line_start: &str) -> f64 {
    let line =
        text.lines().find(|l| l.starts_with(line_start)).unwrap_or_else(|| panic!("no line {line_start} in\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

gantry_testkit::timed_test! {
    async fn metrics_expose_gpus_machines_tasks_and_quotas_to_this_host() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        node_with_a_hot_machine(&server).await;
        let res = reqwest::get(server.url("/metrics")).await.unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
        let text = res.text().await.unwrap();
        // The held GPU runs hot; the model's quotes are escaped.
        let hot = "gantry_gpu_utilization_percent{node=\"mnode\",gpu=\"0\",model=\"SIM \\\"A100\\\"\",machine=\"cooker\",group=\"default\",simulated=\"true\"}";
        assert!(value(&text, hot) >= 90.0, "{text}");
        let free = "gantry_gpu_utilization_percent{node=\"mnode\",gpu=\"1\",model=\"SIM \\\"A100\\\"\",machine=\"\",group=\"\",simulated=\"true\"}";
        assert!(value(&text, free) < 5.0);
        assert_eq!(value(&text, "gantry_gpu_memory_total_bytes{node=\"mnode\",gpu=\"1\""), 1024.0 * 1024.0 * 1024.0);
        assert!(value(&text, "gantry_gpu_temperature_celsius{node=\"mnode\",gpu=\"0\"") >= 84.0);
        assert!(value(&text, "gantry_gpu_memory_used_bytes{node=\"mnode\",gpu=\"0\"") > 0.0, "the hot card uses memory");
        assert!(value(&text, "gantry_gpu_power_watts{node=\"mnode\",gpu=\"0\"") > 0.0, "the hot card draws power");
        assert_eq!(value(&text, "gantry_machines{state=\"running\"}"), 1.0);
        assert_eq!(value(&text, "gantry_group_gpu_quota{group=\"default\"}"), 0.0);
        assert!(text.contains("# TYPE gantry_tasks gauge"));
        // Every sample line is `name{labels} number`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = line.rsplit_once(' ').unwrap();
            assert!(v.parse::<f64>().is_ok(), "bad line {line}");
        }
        // Through a proxy (a forwarding header), this host's rule no longer holds.
        let res = reqwest::Client::new().get(server.url("/metrics")).header("X-Forwarded-For", "203.0.113.9").send().await.unwrap();
        assert_eq!(res.status(), 403);
        assert!(res.text().await.unwrap().contains("--metrics-token"));
    }
}

gantry_testkit::timed_test! {
    async fn with_a_token_metrics_need_it() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = metrics::routes_with_token(server.pool.clone(), Some("s3cret-token".into()));
        tokio::spawn(async move { router::serve(listener, app).await.unwrap() });
        let url = format!("http://{addr}/metrics");
        let client = reqwest::Client::new();
        assert_eq!(client.get(&url).send().await.unwrap().status(), 403, "loopback alone is not enough once a token is set");
        assert_eq!(client.get(&url).bearer_auth("wrong-token!").send().await.unwrap().status(), 403);
        let ok = client.get(&url).bearer_auth("s3cret-token").send().await.unwrap();
        assert_eq!(ok.status(), 200);
        assert!(ok.text().await.unwrap().contains("# TYPE gantry_machines gauge"));
    }
}

gantry_testkit::timed_test! {
    async fn a_lost_nodes_gpus_have_no_gauges_and_the_node_counts_as_lost() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let cluster = telemetry::cluster(&server.pool, "admin", "hot", 1).await;
        // The machine is made by SQL: count its GPU as admission would, so
        // marking the node lost can refund it.
        sqlx::query("UPDATE groups SET gpus_in_use = 1 WHERE name = 'default'").execute(&server.pool).await.unwrap();
        let text = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
        assert!(text.contains("gantry_gpu_utilization_percent{node=\"mnode\""), "{text}");
        gantry_platform::transitions::node::mark_lost(&server.pool, None, cluster.node_id, "unplugged").await.unwrap();
        let text = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
        // Its last readings are stale: no gauge of any GPU family may carry
        // them as current values (Prometheus then marks the series stale).
        assert!(!text.lines().any(|l| l.starts_with("gantry_gpu_") && l.contains("node=\"mnode\"")), "{text}");
        assert!(text.contains("# TYPE gantry_gpu_utilization_percent gauge"), "the families stay declared");
        assert_eq!(value(&text, "gantry_nodes{state=\"lost\"}"), 1.0, "the GPUs' absence is explained");
    }
}

gantry_testkit::timed_test! {
    async fn any_proxy_header_from_this_host_closes_metrics_without_a_token() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = reqwest::Client::new();
        // A plain client on this host (no proxy settings): open, as before.
        assert_eq!(client.get(server.url("/metrics")).send().await.unwrap().status(), 200);
        // A proxy on this host that sets only X-Real-IP (nginx's usual
        // `proxy_set_header X-Real-IP`), or any other proxy header, is not
        // "this host": its clients are anyone.
        for (name, value) in [
            ("X-Real-IP", "203.0.113.9"),
            ("X-Forwarded-Proto", "https"),
            ("X-Forwarded-Host", "gantry.example.org"),
            ("Forwarded", "for=203.0.113.9"),
            ("Via", "1.1 proxy"),
        ] {
            let res = client.get(server.url("/metrics")).header(name, value).send().await.unwrap();
            assert_eq!(res.status(), 403, "{name}: {value}");
            assert!(res.text().await.unwrap().contains("--metrics-token"));
        }
    }
}

gantry_testkit::timed_test! {
    async fn behind_a_configured_proxy_loopback_alone_never_opens_metrics() {
        // --trusted-proxy: a proxy on this host that adds no header at all
        // (stunnel, haproxy in TCP mode) connects from 127.0.0.1 too.
        let dir = tempfile::tempdir().unwrap();
        let proxied = security_support::start(&dir, Security { trusted_proxy: true, ..Security::default() }, false).await;
        let res = reqwest::get(proxied.url("/metrics")).await.unwrap();
        assert_eq!(res.status(), 403, "--trusted-proxy: a token is needed");
        assert!(res.text().await.unwrap().contains("--metrics-token"));
        // --secure-cookies: a TLS terminator is in front.
        let dir = tempfile::tempdir().unwrap();
        let tls = TestServer::start_with(&dir, true).await;
        assert_eq!(reqwest::get(tls.url("/metrics")).await.unwrap().status(), 403, "--secure-cookies: a token is needed");
        // With a token, behind the proxy, the token opens it.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = metrics::routes_with(proxied.pool.clone(), Some("s3cret-token".into()), true);
        tokio::spawn(async move { router::serve(listener, app).await.unwrap() });
        let url = format!("http://{addr}/metrics");
        let client = reqwest::Client::new();
        assert_eq!(client.get(&url).send().await.unwrap().status(), 403);
        let ok = client.get(&url).bearer_auth("s3cret-token").send().await.unwrap();
        assert_eq!(ok.status(), 200);
        assert!(ok.text().await.unwrap().contains("# TYPE gantry_machines gauge"));
    }
}
