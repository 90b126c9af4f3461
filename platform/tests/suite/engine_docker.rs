//! The engine against the real local Docker Engine: a create that fails
//! leaves nothing pinned, a dispatcher that dies at any step boundary
//! converges after restart with nothing left behind, and a lost node's
//! machines are refunded at once and collected when its engine returns.

use gantry_testkit::engine;

use engine::{docker_env, Env};
use gantry_core::task::{MachineState, TaskKind};
use gantry_platform::{
    accounts::User,
    executor::{loopdev, DockerExecutor, Executor},
    images,
    machines::{self, OperationRequest},
    reconcile, transitions,
};
use std::process::Command;

async fn exec(env: &Env) -> Executor {
    env.executor().await
}

/// What the engine has for this test's installation: containers and volumes.
async fn leftovers(env: &Env) -> (usize, Vec<String>) {
    let instance = machines::instance_id(&env.pool).await.unwrap();
    let ex = exec(env).await;
    (ex.list_managed(&instance).await.unwrap().len(), ex.list_managed_volumes(&instance).await.unwrap())
}

/// Loop devices still attached to any image of this test's volume dir.
fn attached_loops(env: &Env) -> Vec<String> {
    let dir = env.dir.path().join("volumes");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries.flatten().flat_map(|e| loopdev::attached_devices(&e.path()).unwrap_or_default()).collect()
}

async fn operate(env: &Env, user: &User, machine_id: i64, kind: TaskKind, keep_volume: bool) -> i64 {
    machines::request_operation(&env.pool, user, OperationRequest { machine_id, kind, keep_volume }).await.unwrap()
}

/// A copy of the demo image whose command cannot start: `docker start`
/// itself fails, every time (a command that merely exits at once races
/// with the dispatcher's look at the container, and can be seen running).
fn exiting_image() -> &'static str {
    const TAG: &str = "gantry/devbox:broken";
    let present = Command::new("docker").args(["image", "inspect", TAG]).output().is_ok_and(|o| o.status.success());
    if !present {
        let name = format!("gantry-exits-{}", rand::random::<u32>());
        let run =
            |args: &[&str]| assert!(Command::new("docker").args(args).status().unwrap().success(), "docker {args:?}");
        run(&["create", "--name", &name, "gantry/devbox:latest"]);
        run(&["commit", "--change", r#"CMD ["/no/such/program"]"#, &name, TAG]);
        run(&["rm", &name]);
    }
    TAG
}

gantry_testkit::timed_test! {
    async fn a_failed_create_leaves_no_container_and_cannot_be_restarted() {
        let env = docker_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let image = images::create_image(&env.pool, None, "broken", exiting_image(), "cannot start", false).await.unwrap();
        let mut req = env.create(&alice, "dies", 2);
        req.image_id = Some(image.id);
        let made = env.admissions.create(req).await.unwrap();
        env.drive().await;

        let m = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
        assert_eq!(m.state, MachineState::Failed, "{}", m.message);
        assert!(m.message.contains("/no/such/program") && m.message.contains("2 GPU(s) returned"), "{}", m.message);
        assert_eq!((&*m.gpu_indexes, m.container_id.as_deref()), (&[][..], None), "holds nothing, remembers no container");
        assert_eq!(leftovers(&env).await.0, 0, "the container pinned to the GPUs is gone");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        for kind in [TaskKind::Restart, TaskKind::Reinstall] {
            let refused = machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: made.machine_id, kind, keep_volume: false })
                .await
                .unwrap_err()
                .to_string();
            assert!(refused.contains("holds 0 of the 2 GPU(s)") && refused.contains("delete it"), "{kind}: {refused}");
        }
        // The GPUs went to someone else meanwhile; deleting the failed one is fine.
        let other = env.admissions.create(env.create(&alice, "next", 2)).await.unwrap();
        env.drive().await;
        operate(&env, &alice, made.machine_id, TaskKind::Delete, false).await;
        operate(&env, &alice, other.machine_id, TaskKind::Delete, false).await;
        env.drive().await;
        assert_eq!(leftovers(&env).await, (0, vec![]));
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_dispatcher_killed_at_any_step_converges_after_restart() {
        let env = docker_env(1, 1).await;
        let alice = env.user("alice", "ml-team").await;
        let mut deaths = 0;
        for at in 0.. {
            // Create, dying at step `at`; a new process resumes it.
            let made = env.admissions.create(env.create(&alice, &format!("c{at}"), 1)).await.unwrap();
            let died_creating = env.drive_dying_at(at).await;
            env.expire_all_leases().await;
            env.drive().await;
            let m = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
            assert_eq!(m.state, MachineState::Running, "create killed at step {at}: {}", m.message);
            assert_eq!(leftovers(&env).await.0, 1, "create killed at step {at}: one container");
            env.assert_quota_consistent().await;

            // Delete, dying at step `at`; a new process resumes it.
            operate(&env, &alice, made.machine_id, TaskKind::Delete, false).await;
            let died_deleting = env.drive_dying_at(at).await;
            env.expire_all_leases().await;
            env.drive().await;
            let state = env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await;
            assert_eq!(state, "deleted", "delete killed at step {at}");
            assert_eq!(leftovers(&env).await, (0, vec![]), "delete killed at step {at}: nothing left on the engine");
            assert!(attached_loops(&env).is_empty(), "delete killed at step {at}: loop devices left");
            env.assert_quota_consistent().await;
            deaths += usize::from(died_creating) + usize::from(died_deleting);
            if !died_creating && !died_deleting {
                assert!(at >= 5, "every step boundary was visited");
                break;
            }
        }
        let resumed = env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'task.lease_expired'").await;
        assert_eq!(resumed as usize, deaths, "each interrupted task was resumed through lease expiry");
        assert_eq!(deaths, 10, "create has 6 step boundaries (the last after its container's state is recorded), delete 4");
    }
}

gantry_testkit::timed_test! {
    async fn a_lost_node_refunds_at_once_and_is_collected_when_its_engine_returns() {
        let env = docker_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let made = env.admissions.create(env.create(&alice, "far", 2)).await.unwrap();
        env.drive().await;
        let real = exec(&env).await;
        assert_eq!(leftovers(&env).await.0, 1);

        // The node stops answering; an admin marks it lost.
        env.use_executor(DockerExecutor::connect("unix:///tmp/gantry-no-engine.sock").unwrap().into());
        let report = transitions::node::mark_lost(&env.pool, None, env.node_id, "power supply died").await.unwrap();
        assert_eq!((report.machines.clone(), report.gpus_refunded), (vec!["far".to_string()], 2));
        let m = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
        assert_eq!(m.state, MachineState::Lost);
        assert!(m.message.contains("power supply died") && m.message.contains("GPUs returned"), "{}", m.message);
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "refunded at once");
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(report.unreachable.len(), 1, "{report:?}");

        // The engine answers again: the collector removes container and volume.
        env.use_executor(real);
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!((report.containers_collected.len(), report.volumes_collected.len()), (1, 1), "{report:?}");
        assert_eq!(leftovers(&env).await, (0, vec![]));
        assert!(attached_loops(&env).is_empty(), "the block device was released");
        // Deleting the lost machine closes its record without the node.
        operate(&env, &alice, made.machine_id, TaskKind::Delete, false).await;
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "deleted");
        let refused = transitions::node::set_state(&env.pool, None, env.node_id, gantry_core::alloc::NodeState::Ready, "").await.unwrap_err();
        assert!(refused.to_string().contains("is lost"), "{refused}");
        env.assert_quota_consistent().await;

        // A lost node can be removed; its closed machines keep their history.
        let node_name = env.text(&format!("SELECT name FROM nodes WHERE id = {}", env.node_id)).await;
        assert_eq!(transitions::node::remove(&env.pool, None, env.node_id).await.unwrap(), node_name);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM nodes").await, 0);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM gpus").await, 0);
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "deleted");
    }
}

gantry_testkit::timed_test! {
    async fn a_delete_that_gives_up_on_the_engine_still_refunds_and_is_collected_later() {
        let env = docker_env(1, 1).await;
        let alice = env.user("alice", "ml-team").await;
        let made = env.admissions.create(env.create(&alice, "stranded", 1)).await.unwrap();
        env.drive().await;
        let real = exec(&env).await;
        env.use_executor(DockerExecutor::connect("unix:///tmp/gantry-no-engine.sock").unwrap().into());
        let task = operate(&env, &alice, made.machine_id, TaskKind::Delete, false).await;
        env.drive().await;
        sqlx::query("UPDATE tasks SET attempts = 5, not_before = 0 WHERE id = ?").bind(task).execute(&env.pool).await.unwrap();
        env.drive().await;
        let message = env.text(&format!("SELECT message FROM tasks WHERE id = {task}")).await;
        assert!(message.contains("did not answer") && message.contains("removed when the engine answers"), "{message}");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "deleted");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        env.use_executor(real);
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(leftovers(&env).await, (0, vec![]));
        assert!(attached_loops(&env).is_empty());
    }
}

gantry_testkit::timed_test! {
    async fn a_kept_volume_is_listed_survives_the_collector_and_carries_data_to_a_new_machine() {
        let env = docker_env(1, 1).await;
        let alice = env.user("alice", "ml-team").await;
        gantry_platform::accounts::create_group(&env.pool, None, "other-team", 1).await.unwrap();
        let carol = env.user("carol", "other-team").await;
        let first = env.admissions.create(env.create(&alice, "first", 1)).await.unwrap();
        env.drive().await;
        let ex = exec(&env).await;
        let container = env.text(&format!("SELECT container_id FROM machines WHERE id = {}", first.machine_id)).await;
        assert_eq!(ex.exec(&container, &["sh", "-c", "echo results > /data/r.txt"]).await.unwrap().0, 0);
        operate(&env, &alice, first.machine_id, TaskKind::Delete, true).await;
        env.drive().await;

        let kept = machines::list_kept_volumes(&env.pool, &alice).await.unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!((kept[0].from_machine.as_str(), kept[0].owner.as_str(), kept[0].size_gb), ("first", "alice", 1));
        assert!(machines::list_kept_volumes(&env.pool, &carol).await.unwrap().is_empty(), "another group sees nothing");
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(leftovers(&env).await.1, vec![kept[0].name.clone()], "the collector leaves a kept volume alone");

        // Another group cannot use it; its owner's group can.
        let mut stolen = env.create(&carol, "thief", 1);
        stolen.kept_volume_id = Some(kept[0].id);
        let refused = env.admissions.create(stolen).await.unwrap_err().to_string();
        assert!(refused.contains("kept volume does not exist"), "{refused}");
        let mut req = env.create(&alice, "second", 1);
        req.kept_volume_id = Some(kept[0].id);
        let second = env.admissions.create(req).await.unwrap();
        env.drive().await;
        let m = machines::machine_detail(&env.pool, &alice, second.machine_id).await.unwrap();
        assert_eq!((m.state.as_str(), m.volume_name.as_str()), ("running", kept[0].name.as_str()), "{}", m.message);
        let (_, out) = ex.exec(m.container_id.as_deref().unwrap(), &["cat", "/data/r.txt"]).await.unwrap();
        assert_eq!(out, "results\n");
        assert!(machines::list_kept_volumes(&env.pool, &alice).await.unwrap().is_empty(), "no longer kept: mounted");

        // Kept again, then deleted from the list: the collector removes it.
        operate(&env, &alice, second.machine_id, TaskKind::Delete, true).await;
        env.drive().await;
        let kept = machines::list_kept_volumes(&env.pool, &alice).await.unwrap();
        assert!(machines::delete_kept_volume(&env.pool, &carol, kept[0].id).await.is_err(), "not another group's to delete");
        machines::delete_kept_volume(&env.pool, &alice, kept[0].id).await.unwrap();
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(report.volumes_collected.len(), 1, "{report:?}");
        assert_eq!(leftovers(&env).await, (0, vec![]));
        assert!(attached_loops(&env).is_empty());
    }
}
