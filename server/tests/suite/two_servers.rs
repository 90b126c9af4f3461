//! Two `gantry serve` processes on one SQLite file drive one Docker node:
//! 50 operations sent to both alternately are each executed exactly once;
//! then one process is killed with SIGKILL in the middle of operations and
//! the other resumes its tasks once their leases expire, leaving nothing
//! behind on the engine. Talks only to 127.0.0.1 and the Docker socket.

use crate::common;

use gantry_platform::{db, executor::DockerExecutor, machines};
use reqwest::StatusCode;
use std::{
    path::Path,
    time::{Duration, Instant},
};

const PASSWORD: &str = "two-servers-admin-1";

type Server = common::child::ChildServer;

async fn start(data_dir: &Path, log: &str) -> Server {
    let env = [
        ("GANTRY_EXECUTOR", "docker"),
        ("GANTRY_NODE_NAME", "shared-node"),
        ("GANTRY_SIM_GPUS", "24"),
        ("GANTRY_LEASE_SECS", "3"),
    ];
    common::child::spawn(data_dir, log, PASSWORD, &env).await
}

impl Server {
    async fn call(&self, function: &str, form: &[(&str, &str)]) -> String {
        let res = self.client.post(format!("http://{}/api/{function}", self.addr)).form(form).send().await.unwrap();
        let status = res.status();
        let body = res.text().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{function} on {}: {body}", self.addr);
        body
    }

    async fn create(&self, name: &str) -> i64 {
        let body = self
            .call(
                "create_machine",
                &[("name", name), ("image_id", ""), ("gpu_count", "1"), ("gpu_model", ""), ("volume_size_gb", "1")],
            )
            .await;
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["machine_id"].as_i64().unwrap()
    }

    async fn operate(&self, machine_id: i64, operation: &str) {
        self.call("machine_operation", &[("machine_id", &machine_id.to_string()), ("operation", operation)]).await;
    }
}

/// Waits (bounded) until no task is open; the servers are other processes,
/// so the database is the only thing to watch.
async fn settle(pool: &db::Pool, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let open: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM tasks WHERE state IN ('pending', 'scheduled', 'running')")
                .fetch_one(pool)
                .await
                .unwrap();
        if open == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{open} task(s) still open after {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn scalar(pool: &db::Pool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

gantry_testkit::timed_test! {
    limit = 420;
    async fn two_servers_on_one_database_run_every_task_exactly_once() {
        let dir = tempfile::tempdir().unwrap();
        // One after the other: the second finds the schema and the admin made.
        let a = start(dir.path(), "a.log").await;
        let b = start(dir.path(), "b.log").await;
        let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
        sqlx::query("UPDATE groups SET gpu_quota = 24 WHERE name = 'default'").execute(&pool).await.unwrap();
        let servers = [&a, &b];

        // 50 operations, alternating between the two servers.
        let mut ids = Vec::new();
        for i in 0..20 {
            ids.push(servers[i % 2].create(&format!("m{i}")).await);
        }
        settle(&pool, Duration::from_secs(180)).await;
        for (i, id) in ids.iter().take(15).enumerate() {
            servers[i % 2].operate(*id, "restart").await;
        }
        settle(&pool, Duration::from_secs(120)).await;
        for (i, id) in ids.iter().take(15).enumerate() {
            servers[(i + 1) % 2].operate(*id, "delete").await;
        }
        settle(&pool, Duration::from_secs(120)).await;

        let tasks = scalar(&pool, "SELECT COUNT(*) FROM tasks").await;
        assert_eq!(tasks, 50);
        let once = scalar(&pool, "SELECT COUNT(*) FROM tasks WHERE state = 'succeeded' AND attempts = 1").await;
        assert_eq!(once, 50, "every task succeeded at its first and only claim");
        let claims = scalar(&pool, "SELECT COUNT(*) FROM audit_log WHERE action = 'task.claim'").await;
        assert_eq!(claims, 50, "exactly one claim per task");
        let owners = scalar(&pool, "SELECT COUNT(DISTINCT lease) FROM (SELECT substr(detail, instr(detail, ' by ') + 4, instr(detail, ', attempt') - instr(detail, ' by ') - 4) AS lease FROM audit_log WHERE action = 'task.claim')").await;
        assert_eq!(owners, 2, "both servers executed tasks");
        let instance = machines::instance_id(&pool).await.unwrap();
        let engine = DockerExecutor::connect("unix:///var/run/docker.sock").unwrap();
        assert_eq!(engine.list_managed(&instance).await.unwrap().len(), 5, "one container per live machine");

        // Server A dies by SIGKILL with operations in flight; B resumes them.
        for (i, id) in ids.iter().skip(15).enumerate() {
            servers[i % 2].operate(*id, "reinstall").await;
        }
        drop(a);
        settle(&pool, Duration::from_secs(180)).await;
        let reinstalled = scalar(&pool, "SELECT COUNT(*) FROM tasks WHERE kind = 'reinstall' AND state = 'succeeded'").await;
        assert_eq!(reinstalled, 5, "every reinstall finished, those A had claimed resumed by B");
        let running = scalar(&pool, "SELECT COUNT(*) FROM machines WHERE state = 'running'").await;
        assert_eq!(running, 5);
        assert_eq!(engine.list_managed(&instance).await.unwrap().len(), 5, "no duplicate container after the takeover");

        // Clean up through the surviving server.
        for id in ids.iter().skip(15) {
            b.operate(*id, "delete").await;
        }
        settle(&pool, Duration::from_secs(120)).await;
        assert_eq!(engine.list_managed(&instance).await.unwrap().len(), 0);
        assert_eq!(engine.list_managed_volumes(&instance).await.unwrap(), Vec::<String>::new());
        assert_eq!(scalar(&pool, "SELECT gpus_in_use FROM groups WHERE name = 'default'").await, 0);
    }
}
