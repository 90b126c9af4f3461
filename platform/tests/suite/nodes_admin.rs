//! Adding worker nodes: the connection is tested before anything is saved,
//! bad input is refused with a clear message, and the monitor keeps the
//! heartbeat of every engine that answers.

use crate::common;

use common::env;
use gantry_core::alloc::NodeState;
use gantry_platform::{
    cluster,
    nodes::{self, AddNode},
    transitions, PlatformError,
};

fn node(name: &str, endpoint: &str) -> AddNode {
    AddNode { name: name.into(), region_code: "local".into(), endpoint: endpoint.into(), gpu_count: 2, gpu_model: "L40S".into(), arch: String::new() }
}

gantry_testkit::timed_test! {
    async fn a_node_is_added_only_when_its_engine_answers() {
        let env = env("simulated", 1, 1).await;
        let fleet = &env.dispatcher.fleet;
        let admin = env.user("root", "ml-team").await.id;
        let before = env.scalar("SELECT COUNT(*) FROM nodes").await;
        let dead = nodes::add_node(&env.pool, fleet, admin, &node("dead", "unix:///tmp/gantry-no-engine.sock")).await.unwrap_err();
        assert!(matches!(&dead, PlatformError::BadRequest(m) if m.starts_with("connection test failed, nothing saved")), "{dead}");
        for (bad, why) in [
            (node("xy", "ftp://host"), "endpoint must be"),
            (node("Bad Name", "unix:///var/run/docker.sock"), "node name"),
            (AddNode { gpu_model: String::new(), ..node("nomodel", "unix:///var/run/docker.sock") }, "GPU model"),
        ] {
            let e = nodes::add_node(&env.pool, fleet, admin, &bad).await.unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, before, "nothing saved");

        let arm = AddNode { arch: "arm64".into(), ..node("second", "unix:///var/run/docker.sock") };
        let id = nodes::add_node(&env.pool, fleet, admin, &arm).await.unwrap();
        // Written with the node (one commit): its architecture and who added it.
        assert_eq!(env.text(&format!("SELECT arch FROM nodes WHERE id = {id}")).await, "arm64");
        assert_eq!(env.scalar("SELECT actor_id FROM audit_log WHERE action = 'node.add'").await, admin);
        let dup = nodes::add_node(&env.pool, fleet, admin, &node("second", "unix:///var/run/docker.sock")).await.unwrap_err();
        assert!(matches!(dup, PlatformError::Conflict(_)), "{dup}");
        // One engine, one node: its GPUs would be offered twice.
        let twin = nodes::add_node(&env.pool, fleet, admin, &node("third", " unix:///var/run/docker.sock")).await.unwrap_err();
        assert!(matches!(&twin, PlatformError::Conflict(m) if m.contains("node second already has the engine")), "{twin}");
        let listed = cluster::list_nodes(&env.pool).await.unwrap().into_iter().find(|n| n.id == id).unwrap();
        assert_eq!((listed.gpu_total, listed.gpu_models.as_str(), listed.simulated), (2, "L40S", true), "declared GPUs are labelled");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'node.add'").await, 1);

        // The monitor records heartbeats of engines that answer.
        sqlx::query("UPDATE nodes SET last_heartbeat = 0").execute(&env.pool).await.unwrap();
        let silent = nodes::monitor_once(&env.pool, fleet).await.unwrap();
        assert!(silent.is_empty(), "{silent:?}");
        assert_eq!(env.scalar(&format!("SELECT last_heartbeat > 0 FROM nodes WHERE id = {id}")).await, 1);

        // Drain, then lost: a lost node's state is final.
        transitions::node::set_state(&env.pool, Some(admin), id, NodeState::Draining, "maintenance").await.unwrap();
        assert_eq!(env.text(&format!("SELECT state || ':' || state_reason FROM nodes WHERE id = {id}")).await, "draining:maintenance");
        transitions::node::set_state(&env.pool, Some(admin), id, NodeState::Lost, "").await.unwrap();
        assert_eq!(env.text(&format!("SELECT state || ':' || state_reason FROM nodes WHERE id = {id}")).await, "lost:marked lost by an administrator");
        let again = transitions::node::set_state(&env.pool, Some(admin), id, NodeState::Ready, "").await.unwrap_err();
        assert!(matches!(again, PlatformError::Conflict(_)), "{again}");
    }
}

gantry_testkit::timed_test! {
    async fn a_node_with_live_machines_cannot_be_removed() {
        let env = env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        env.admissions.create(env.create(&alice, "busy", 1)).await.unwrap();
        let refused = transitions::node::remove(&env.pool, None, env.node_id).await.unwrap_err();
        assert!(refused.to_string().contains("still has 1 machine(s)"), "{refused}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, 1, "nothing removed");
    }
}

gantry_testkit::timed_test! {
    async fn a_node_holding_kept_volumes_is_not_removed_until_they_are_deleted() {
        let env = env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let machine = env.admissions.create(env.create(&alice, "keeper", 1)).await.unwrap().machine_id;
        env.drive().await;
        let keep = gantry_platform::machines::OperationRequest { machine_id: machine, kind: gantry_core::task::TaskKind::Delete, keep_volume: true };
        gantry_platform::machines::request_operation(&env.pool, &alice, keep).await.unwrap();
        env.drive().await;
        let (kept_id, volume): (i64, String) = sqlx::query_as("SELECT id, name FROM kept_volumes").fetch_one(&env.pool).await.unwrap();
        transitions::node::mark_lost(&env.pool, None, env.node_id, "power supply failed").await.unwrap();

        // Forgetting the volume would let the collector delete alice's data
        // once the repaired node's engine is added again.
        let refused = transitions::node::remove(&env.pool, None, env.node_id).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(m) if m.contains(&format!("1 kept data volume(s): {volume} (alice)"))), "{refused}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, 1, "nothing removed");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM kept_volumes").await, 1, "the volume is still kept");

        // Its owner deletes it (a lost node's engine is not needed for that);
        // then the node goes.
        gantry_platform::machines::delete_kept_volume(&env.pool, &alice, kept_id).await.unwrap();
        transitions::node::remove(&env.pool, None, env.node_id).await.unwrap();
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, 0);
    }
}
