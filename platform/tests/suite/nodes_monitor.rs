//! The node monitor pings every engine at once and writes each heartbeat
//! as its engine answers: an engine that never answers (a powered-off host
//! whose address drops packets) holds up only its own node. Before, the
//! pings went one after another, and a few such engines made a pass
//! outlast the heartbeat's 60 s, so healthy nodes looked stale and took
//! nothing new.

use gantry_testkit::engine;

use gantry_platform::{
    cluster,
    executor::{DockerExecutor, Executor, SimulatedExecutor},
    gpus::{self, SimulatedGpus},
    nodes,
};
use std::time::Duration;
use tokio::{io::AsyncReadExt, net::TcpListener, sync::mpsc};

gantry_testkit::timed_test! {
    async fn an_engine_that_never_answers_holds_up_no_other_nodes_heartbeat() {
        let env = engine::env("simulated", 1, 1).await;
        // An engine that takes requests and never answers them; it says
        // when the monitor's request has reached it.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (asked, mut reached) = mpsc::unbounded_channel::<()>();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let asked = asked.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = sock.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let _ = asked.send(());
                    }
                });
            }
        });
        // Registered before `late-box`, so a monitor going node by node
        // (in id order) would wait on it before reaching that one.
        let found = gpus::simulated("silent-box", &SimulatedGpus { count: 1, model: "SIM-A100".into(), memory_mb: 1024 });
        let endpoint = format!("tcp://{addr}");
        let silent = cluster::register_node(
            &env.pool,
            cluster::NodeRegistration { name: "silent-box", region_code: "local", docker_endpoint: &endpoint, volume_dir: "", executor: "docker", cpu_count: 2, memory_mb: 1024, gpus: &found },
        )
        .await
        .unwrap();
        let hour = Duration::from_secs(3600);
        env.dispatcher.fleet.insert(silent, Executor::Docker(DockerExecutor::connect(&endpoint).unwrap().with_timeouts(hour, hour)));
        let found = gpus::simulated("late-box", &SimulatedGpus { count: 1, model: "SIM-A100".into(), memory_mb: 1024 });
        let late = engine::register_simulated(&env.pool, "late-box", &found).await.unwrap();
        env.dispatcher.fleet.insert(late, Executor::from(SimulatedExecutor::new()));
        assert!(silent < late);
        sqlx::query("UPDATE nodes SET last_heartbeat = 0").execute(&env.pool).await.unwrap();

        let pass = tokio::spawn({
            let (pool, fleet) = (env.pool.clone(), env.dispatcher.fleet.clone());
            async move { nodes::monitor_with(&pool, &fleet, hour).await }
        });
        reached.recv().await.expect("the silent engine was asked");
        // The answering node's heartbeat comes while the other still waits.
        let heartbeat = format!("SELECT last_heartbeat FROM nodes WHERE id = {late}");
        while env.scalar(&heartbeat).await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!pass.is_finished(), "the pass still waits on the silent engine");
        assert_eq!(env.scalar(&format!("SELECT last_heartbeat FROM nodes WHERE id = {silent}")).await, 0);
        pass.abort();
    }
}
