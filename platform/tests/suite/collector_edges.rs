//! The collector on an engine two node rows name (a node renamed at start,
//! an engine added twice before that was refused): visiting one node must
//! not remove the other node's live containers.

use crate::common::env;
use gantry_platform::{
    cluster::{self, NodeRegistration},
    executor::{Executor, SimulatedExecutor},
    reconcile,
};

gantry_testkit::timed_test! {
    async fn a_live_machine_of_another_node_on_the_same_engine_is_not_collected() {
        let env = env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "lives", 1)).await.unwrap().machine_id;
        env.drive().await;
        assert_eq!(sim.containers().len(), 1);

        let twin = cluster::register_node(
            &env.pool,
            NodeRegistration { name: "twin", region_code: "local", docker_endpoint: "simulated://twin", volume_dir: "", executor: "simulated", cpu_count: 0, memory_mb: 0, gpus: &[] },
        )
        .await
        .unwrap();
        env.dispatcher.fleet.insert(twin, Executor::from(sim.clone()));
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(report.containers_collected.is_empty(), "{report:?}");
        assert_eq!(sim.containers().len(), 1, "the machine's container is still there");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {m}")).await, "running");
    }
}
