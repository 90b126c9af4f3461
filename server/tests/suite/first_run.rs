//! A new installation works on first start: the default group gets the
//! GPUs of the first node (audited), a later start never overrides the
//! admin's choice, and the dashboard tells an admin what is missing —
//! quota or a ready node — with links to fix it.

use crate::common;

use gantry_platform::db;

const PASSWORD: &str = "first-run-admin-1";

async fn serve(dir: &std::path::Path, log: &str) -> common::child::ChildServer {
    let env = [("GANTRY_EXECUTOR", "simulated"), ("GANTRY_NODE_NAME", "first-node"), ("GANTRY_SIM_GPUS", "3")];
    common::child::spawn(dir, log, PASSWORD, &env).await
}

async fn dashboard(server: &common::child::ChildServer) -> String {
    let res = server.client.get(format!("http://{}/", server.addr)).send().await.unwrap();
    assert_eq!(res.status(), 200);
    res.text().await.unwrap()
}

async fn default_quota(pool: &db::Pool) -> i64 {
    sqlx::query_scalar("SELECT gpu_quota FROM groups WHERE name = 'default'").fetch_one(pool).await.unwrap()
}

gantry_testkit::timed_test! {
    limit = 180;
    async fn first_start_gives_the_default_group_the_first_nodes_gpus_once() {
        let dir = tempfile::tempdir().unwrap();
        // The data directory (as `make run` finds it: readable by all) and
        // the database come out private: sessions and hashes are inside.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let first = serve(dir.path(), "first.log").await;
        let mode = |p: std::path::PathBuf| std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(dir.path().to_path_buf()), 0o700);
        for file in ["gantry.db", "gantry.db-wal", "gantry.db-shm"] {
            assert_eq!(mode(dir.path().join(file)), 0o600, "{file}");
        }
        let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
        assert_eq!(default_quota(&pool).await, 3, "the 3 simulated GPUs of the first node");
        let audited = common::count(&pool, "SELECT COUNT(*) FROM audit_log WHERE action = 'group.first_run_quota'").await;
        assert_eq!(audited, 1);
        let page = dashboard(&first).await;
        assert!(!page.contains("data-testid=\"next-steps\""), "nothing to do: quota and a ready node are there");
        drop(first);

        // The admin sets the quota to 0 on purpose; the next start keeps it.
        sqlx::query("UPDATE groups SET gpu_quota = 0 WHERE name = 'default'").execute(&pool).await.unwrap();
        let second = serve(dir.path(), "second.log").await;
        assert_eq!(default_quota(&pool).await, 0, "a later start never overrides the admin's choice");
        let page = dashboard(&second).await;
        assert!(page.contains("data-testid=\"next-quota\""), "the admin is told the group has no quota");
        assert!(page.contains("href=\"/admin/groups\""), "with a link to the Groups page");
        assert!(!page.contains("data-testid=\"next-nodes\""), "the node is ready");

        // No ready node: the admin is sent to the Nodes page.
        sqlx::query("UPDATE nodes SET state = 'draining'").execute(&pool).await.unwrap();
        let page = dashboard(&second).await;
        assert!(page.contains("data-testid=\"next-nodes\""), "the admin is told no node is ready");
        assert!(page.contains("href=\"/admin/nodes\""), "with a link to the Nodes page");
    }
}

/// Runs `gantry serve` over `dir` with `env` until it exits (it is killed
/// if the test ends first); its exit status and what it printed.
pub(crate) async fn serve_to_exit(dir: &std::path::Path, env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_gantry"));
    command
        .arg("serve")
        .env("GANTRY_DATA_DIR", dir)
        .env("GANTRY_SITE_ROOT", dir.join("no-site"))
        .env("GANTRY_EXECUTOR", "simulated")
        // Other test servers run beside it: no SSH gateway on the shared default port.
        .env("GANTRY_SSH_LISTEN", "")
        .env("RUST_LOG", "warn")
        .env_remove("GANTRY_ADMIN_PASSWORD")
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().await.expect("run gantry serve");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status, text)
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_busy_port_stops_the_start_before_the_first_admin_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = busy.local_addr().unwrap().to_string();
        let (status, printed) = serve_to_exit(dir.path(), &[("GANTRY_LISTEN", addr.as_str())]).await;
        assert!(!status.success(), "gantry serve on a busy port ended with {status}:\n{printed}");
        assert!(printed.contains(&format!("cannot listen on {addr}")), "{printed}");
        // No one-time password went to a log nobody reads next to the error:
        // the next start (on a free port) creates the admin and shows it.
        assert!(!printed.contains("First administrator created"), "{printed}");
        let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
        assert_eq!(common::count(&pool, "SELECT COUNT(*) FROM users").await, 0, "no account was made");
        drop(busy);
    }
}
