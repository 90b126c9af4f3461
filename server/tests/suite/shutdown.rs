//! A stopped server ends — and hands its work back — even while a client
//! holds a connection open that will never finish a request (an idle
//! keep-alive socket, a half-sent request line, a long download): open
//! connections may not keep the process, or its leased tasks, alive; an
//! operation in flight at SIGTERM is handed back, and the next start runs
//! it at once rather than a lease period later.

use crate::common;

use std::io::Write;

gantry_testkit::timed_test! {
    limit = 90;
    async fn sigterm_ends_the_server_despite_a_connection_that_never_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = common::child::spawn(dir.path(), "log", "a-good-password-1", &[("GANTRY_EXECUTOR", "simulated")]).await;
        // Half a request line, then silence.
        let mut idle = std::net::TcpStream::connect(server.addr).unwrap();
        idle.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        // The connection is being served (the server answers others meanwhile).
        let health = server.client.get(format!("http://{}/healthz", server.addr)).send().await.unwrap();
        assert_eq!(health.status(), reqwest::StatusCode::OK);

        let status = server.terminate().await;
        assert!(status.success(), "gantry serve ended with {status}");
        // (Before, it waited on that connection for ever.)
        drop(idle);
    }
}

/// A TCP front for the local Docker Engine that forwards until muted, then
/// holds every connection (open and new) in silence: the engine "hangs" in
/// the middle of whatever call is being made.
struct MutableEngine {
    addr: std::net::SocketAddr,
    mute: tokio::sync::watch::Sender<bool>,
}

impl MutableEngine {
    async fn start() -> MutableEngine {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mute, muted) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut muted = muted.clone();
                tokio::spawn(async move {
                    if !*muted.borrow() {
                        let Ok(mut engine) = tokio::net::UnixStream::connect("/var/run/docker.sock").await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut engine) => return,
                            _ = muted.wait_for(|m| *m) => {}
                        }
                    }
                    // Silent for as long as the test runs.
                    let _held = client;
                    std::future::pending::<()>().await;
                });
            }
        });
        MutableEngine { addr, mute }
    }
}

async fn task_of(pool: &gantry_platform::db::Pool, machine_id: i64) -> (i64, String, Option<String>) {
    sqlx::query_as("SELECT id, state, lease_owner FROM tasks WHERE machine_id = ? AND kind = 'create'")
        .bind(machine_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    limit = 180;
    async fn an_operation_in_flight_at_sigterm_is_resumed_by_the_next_start_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let engine = MutableEngine::start().await;
        let endpoint = format!("tcp://{}", engine.addr);
        // Leases of ten minutes: were the operation not handed back, the
        // next start would wait that long, past this test's limit.
        let first_env = [
            ("GANTRY_EXECUTOR", "docker"),
            ("GANTRY_DOCKER_ENDPOINT", endpoint.as_str()),
            ("GANTRY_NODE_NAME", "handover-node"),
            ("GANTRY_SIM_GPUS", "2"),
            ("GANTRY_LEASE_SECS", "600"),
            ("GANTRY_SHUTDOWN_GRACE_SECS", "0"),
        ];
        let mut first = common::child::spawn(dir.path(), "first.log", "handover-admin-1", &first_env).await;
        let pool = gantry_platform::db::connect_file(&dir.path().join("gantry.db")).await.unwrap();

        engine.mute.send(true).unwrap();
        let res = first
            .client
            .post(format!("http://{}/api/create_machine", first.addr))
            .form(&[("name", "handed-over"), ("image_id", ""), ("gpu_count", "1"), ("gpu_model", ""), ("volume_size_gb", "1")])
            .send()
            .await
            .unwrap();
        let body = res.text().await.unwrap();
        let machine_id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["machine_id"].as_i64().unwrap_or_else(|| panic!("{body}"));
        // Another process: the database is the only thing to watch.
        let task = loop {
            let (task, state, lease) = task_of(&pool, machine_id).await;
            if state == "running" && lease.is_some() {
                break task;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };

        let status = first.terminate().await;
        assert!(status.success(), "gantry serve ended with {status}");
        let (_, state, lease) = task_of(&pool, machine_id).await;
        let message: String = sqlx::query_scalar("SELECT message FROM tasks WHERE id = ?").bind(task).fetch_one(&pool).await.unwrap();
        let log = std::fs::read_to_string(dir.path().join("first.log")).unwrap_or_default();
        assert_eq!((state.as_str(), lease), ("scheduled", None), "the stopped server kept its operation: {message}\n{log}");
        let released: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'task.lease_released' AND detail LIKE ?")
            .bind(format!("task #{task}:%"))
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(released, 1);

        // The next start (no engine now: a simulated node) runs it.
        let second_env = [("GANTRY_EXECUTOR", "simulated"), ("GANTRY_NODE_NAME", "handover-node"), ("GANTRY_SIM_GPUS", "2"), ("GANTRY_LEASE_SECS", "600")];
        let _second = common::child::spawn(dir.path(), "second.log", "handover-admin-1", &second_env).await;
        loop {
            let state: String = sqlx::query_scalar("SELECT state FROM machines WHERE id = ?").bind(machine_id).fetch_one(&pool).await.unwrap();
            if state == "running" {
                break;
            }
            assert_ne!(state, "failed", "the resumed create failed; see second.log");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let (_, state, _) = task_of(&pool, machine_id).await;
        assert_eq!(state, "succeeded");
    }
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_setting_that_fails_at_start_stops_it_before_any_service_runs() {
        let dir = tempfile::tempdir().unwrap();
        let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        // A region's dataset store given without its code: refused at start.
        let env = [("GANTRY_LISTEN", listen.as_str()), ("GANTRY_DATASETS_REGION_DIRS", "/srv/datasets/eu")];
        let (status, printed) = crate::first_run::serve_to_exit(dir.path(), &env).await;
        assert!(!status.success(), "gantry serve ended with {status}:\n{printed}");
        assert!(printed.contains("--datasets-region-dir wants CODE=DIR"), "{printed}");
        // Nothing started before the refusal: no node registered (so no
        // dispatcher claimed work), no first admin made.
        let pool = gantry_platform::db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
        assert_eq!(common::count(&pool, "SELECT COUNT(*) FROM nodes").await, 0, "the local node was registered:\n{printed}");
        assert_eq!(common::count(&pool, "SELECT COUNT(*) FROM users").await, 0);
    }
}
