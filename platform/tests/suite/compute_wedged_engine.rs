//! An engine that takes connections and never answers (a dockerd wedged by
//! GPU driver trouble) holds up only its own node's jobs: the watcher still
//! stops another node's job at its time limit while the wedged engine sits
//! on its request.

use crate::compute_sim::sim_compute_env;
use gantry_testkit::engine;

use engine::compute_job;
use gantry_platform::{
    cluster::{self, NodeRegistration},
    compute::{self, Command},
};
use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};
use tokio::{io::AsyncReadExt, net::TcpListener};

/// What the wedged engine saw: a request, and whether its client has gone.
#[derive(Default)]
struct Seen {
    request: AtomicBool,
    closed: AtomicBool,
}

/// `tcp://127.0.0.1:PORT` of an engine that reads and never answers.
async fn wedged_engine() -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("tcp://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let seen2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let seen = seen2.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    seen.request.store(true, Ordering::SeqCst);
                }
                seen.closed.store(true, Ordering::SeqCst);
            });
        }
    });
    (endpoint, seen)
}

/// Polls until `done` holds (each check is a database read).
async fn until<F: std::future::Future<Output = bool>>(mut done: impl FnMut() -> F) {
    while !done().await {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_wedged_engine_does_not_hold_up_another_nodes_jobs() {
        let (env, _sim, _root, alice) = sim_compute_env().await;
        let first = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("stuck", Command::Argv(vec!["true".into()]))).await.unwrap();
        let second = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("late", Command::Argv(vec!["true".into()]))).await.unwrap();
        env.drive().await;
        let m1 = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", first.id)).await;
        let m2 = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", second.id)).await;

        // The first job's node is now one whose engine is wedged; the
        // second job, on the healthy node, is past its time limit.
        let (endpoint, seen) = wedged_engine().await;
        let reg = NodeRegistration { name: "wedged", region_code: "local", docker_endpoint: &endpoint, volume_dir: "", executor: "docker", cpu_count: 2, memory_mb: 1024, gpus: &[] };
        let wedged = cluster::register_node(&env.pool, reg).await.unwrap();
        sqlx::query("UPDATE machines SET node_id = ? WHERE id = ?").bind(wedged).bind(m1).execute(&env.pool).await.unwrap();
        sqlx::query("UPDATE compute_tasks SET started_at = started_at - 100000 WHERE id = ?").bind(second.id).execute(&env.pool).await.unwrap();

        let (pool, fleet) = (env.pool.clone(), env.dispatcher.fleet.clone());
        let pass = tokio::spawn(async move { compute::watch_once(&pool, &fleet).await });
        until(|| async { seen.request.load(Ordering::SeqCst) }).await;
        let open_delete = format!("SELECT COUNT(*) FROM tasks WHERE machine_id = {m2} AND kind = 'delete'");
        until(|| async { env.scalar(&open_delete).await > 0 }).await;
        assert!(
            !seen.closed.load(Ordering::SeqCst),
            "the healthy node's job was stopped only after the wedged engine's request had given up"
        );
        let message = env.text(&format!("SELECT message FROM compute_tasks WHERE id = {}", second.id)).await;
        assert!(message.contains("time limit"), "{message}");
        pass.abort();
    }
}
