//! Errors (issue 11): typed garbage in any server function's integer
//! argument answers 400 with a clear message — every such function, found
//! by reading the sources, so a new one is covered as soon as it exists; no
//! internal error text (SQL, store errors) reaches a client, and the
//! message names the request id the client also gets as a header.

use crate::security_support;

use gantry_server::security::Security;
use security_support::{gate, start, ADMIN_PASSWORD};

const INTEGER: [&str; 6] = ["i64", "i32", "u32", "u64", "usize", "Option<i64>"];

/// (endpoint, [(argument, type)]) of every `#[server]` function in the
/// modules app/src/api/mod.rs declares.
fn server_functions() -> Vec<(String, Vec<(String, String)>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../app/src/api");
    let modules = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
    let mut found = Vec::new();
    for module in modules.lines().filter_map(|l| l.trim().strip_prefix("pub mod ")?.strip_suffix(';')) {
        let src = std::fs::read_to_string(dir.join(format!("{module}.rs"))).unwrap();
        for part in src.split("#[server(").skip(1) {
            let endpoint = part.split("endpoint = \"").nth(1).unwrap().split('"').next().unwrap().to_string();
            let sig = part.split("pub async fn ").nth(1).unwrap();
            let args = sig.split_once('(').unwrap().1.split(") ->").next().unwrap();
            let args = args
                .split(',')
                .filter_map(|a| a.split_once(':'))
                .map(|(n, t)| (n.trim().to_string(), t.split_whitespace().collect::<String>()))
                .collect();
            found.push((endpoint, args));
        }
    }
    found
}

gantry_testkit::timed_test! {
    async fn garbage_in_any_integer_argument_answers_400() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        let c = server.client();
        assert_eq!(server.login(&c, "admin", ADMIN_PASSWORD).await.status(), 200);
        let mut checked = Vec::new();
        for (endpoint, args) in server_functions() {
            if !args.iter().any(|(_, t)| INTEGER.contains(&t.as_str())) {
                continue;
            }
            let form: Vec<(String, String)> =
                args.iter().map(|(n, t)| (n.clone(), if INTEGER.contains(&t.as_str()) { "abc".into() } else { "x".into() })).collect();
            let res = c.post(server.url(&format!("/api/{endpoint}"))).form(&form).send().await.unwrap();
            let status = res.status().as_u16();
            let body = res.text().await.unwrap();
            assert_eq!(status, 400, "{endpoint}: {body}");
            assert!(body.contains("bad request"), "{endpoint}: {body}");
            checked.push(endpoint);
        }
        eprintln!("{} server functions with integer arguments answered 400: {checked:?}", checked.len());
        assert!(checked.len() >= 10, "found only {checked:?}");
        for must in ["machine_operation", "cancel_task", "machine_detail", "admin/set_user_enabled", "admin/reset_password"] {
            assert!(checked.iter().any(|e| e == must), "{must} not among {checked:?}");
        }
    }
}

gantry_testkit::timed_test! {
    async fn internal_errors_show_a_request_id_and_no_detail() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security { gate: gate(2), ..Security::default() }, false).await;
        let c = server.client();
        assert_eq!(server.login(&c, "admin", ADMIN_PASSWORD).await.status(), 200);
        sqlx::query("DROP TABLE audit_log").execute(&server.pool).await.unwrap();
        let res = c.post(server.url("/api/admin/audit_page")).send().await.unwrap();
        assert_eq!(res.status(), 500);
        let id = res.headers()["x-request-id"].to_str().unwrap().to_string();
        let body = res.text().await.unwrap();
        assert!(body.contains(&format!("request id {id}")), "{body}");
        for leak in ["no such table", "audit_log", "sqlx", "SELECT"] {
            assert!(!body.contains(leak), "{leak} leaked: {body}");
        }
        let res = c.post(server.url("/api/admin/audit_page")).send().await.unwrap();
        assert!(!res.headers().contains_key("x-gantry-not-kept"), "the page cache's marker stays in the server");
        // A page that met the error (as a browser gets it: 200, the error in
        // the page) is rendered anew each time, never kept with an old id.
        // Three: the first view may still renew the session (a commit).
        let mut ids = Vec::new();
        for _ in 0..3 {
            let res = c.get(server.url("/admin/audit")).header("accept", "text/html").send().await.unwrap();
            assert_eq!(res.status(), 200);
            assert!(!res.headers().contains_key("x-gantry-not-kept"), "the marker stays in the server");
            let id = res.headers()["x-request-id"].to_str().unwrap().to_string();
            let body = res.text().await.unwrap();
            assert!(body.contains(&format!("request id {id}")), "this answer's own request id: {body}");
            ids.push(id);
        }
        assert!(ids[0] != ids[1] && ids[1] != ids[2], "{ids:?}");

        server.pool.close().await;
        let health = c.get(server.url("/healthz")).send().await.unwrap();
        assert_eq!(health.status(), 503);
        assert_eq!(health.text().await.unwrap(), "database unavailable; see the server log");
    }
}
