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
