//! An engine's own error text names its endpoint (an address inside the
//! cluster, a socket path) and host paths and devices. The task and machine
//! messages their owner reads, and a refused snapshot delete, give a plain
//! reason instead; the engine's text goes to the server log.

use gantry_platform::{
    executor::{ExecError, Executor, SimulatedExecutor},
    snapshots, PlatformError,
};
use gantry_testkit::engine::{env, Env};

const UNREACHABLE: &str = "Docker Engine at tcp://10.1.2.3:2376 is unreachable: error trying to connect: \
                           tcp connect error: /var/run/gantry/engine.sock: Connection refused (os error 111)";
const MOUNT_FAILED: &str = "start container 4f2a failed (HTTP 500): error while mounting volume \
                            '/var/lib/docker/volumes/gantry-v1/_data': failed to mount local volume: \
                            mount /dev/loop9:/var/lib/docker/volumes/gantry-v1/_data, flags: 0x0: no such device";

/// Nothing of the engine's text: no address, socket or host path.
fn assert_private(text: &str) {
    for secret in ["tcp://", "10.1.2.3", "2376", "/var/", "/dev/", "engine.sock", "os error"] {
        assert!(!text.contains(secret), "{secret:?} reached the user: {text}");
    }
}

async fn sim_env() -> (Env, SimulatedExecutor) {
    let env = env("simulated", 2, 2).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    (env, sim)
}

/// The task's and the machine's messages, as the owner's pages show them.
async fn messages(env: &Env, task: i64, machine: i64) -> (String, String) {
    let task = env.text(&format!("SELECT message FROM tasks WHERE id = {task}")).await;
    let machine = env.text(&format!("SELECT message FROM machines WHERE id = {machine}")).await;
    (task, machine)
}

gantry_testkit::timed_test! {
    async fn an_unreachable_engine_is_a_plain_reason_in_the_task_message() {
        let (env, sim) = sim_env().await;
        let alice = env.user("alice", "ml-team").await;
        sim.fail_next("create_container", ExecError::Unavailable(UNREACHABLE.into()));
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;
        let (task, machine) = messages(&env, made.task_id, made.machine_id).await;
        assert!(task.contains("did not answer") && task.contains("retry 2 of 5"), "{task}");
        assert_private(&task);
        assert_private(&machine);
    }
}

gantry_testkit::timed_test! {
    async fn a_mount_failure_is_a_plain_reason_in_the_task_and_machine_messages() {
        let (env, sim) = sim_env().await;
        let alice = env.user("alice", "ml-team").await;
        sim.fail_next("start_container", ExecError::Failed(MOUNT_FAILED.into()));
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;
        let (task, machine) = messages(&env, made.task_id, made.machine_id).await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {}", made.task_id)).await, "failed", "{task}");
        assert!(task.contains("data volume could not be mounted"), "{task}");
        assert!(machine.contains("data volume could not be mounted"), "{machine}");
        assert_private(&task);
        assert_private(&machine);
    }
}

gantry_testkit::timed_test! {
    async fn a_loop_device_refusal_is_a_plain_reason() {
        let (env, sim) = sim_env().await;
        let alice = env.user("alice", "ml-team").await;
        let refusal = "data volume gantry-v1: /dev/loop5 now holds /var/lib/gantry/volumes/other.img; refusing to mount";
        sim.fail_next("ensure_volume", ExecError::Failed(refusal.into()));
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;
        let (task, machine) = messages(&env, made.task_id, made.machine_id).await;
        assert!(task.contains("data volume could not be mounted"), "{task}");
        assert_private(&task);
        assert_private(&machine);
    }
}

gantry_testkit::timed_test! {
    async fn any_other_engine_refusal_names_no_host_path() {
        let (env, sim) = sim_env().await;
        let alice = env.user("alice", "ml-team").await;
        let refusal = "create container failed (HTTP 400): invalid mount config for type \"bind\": \
                       bind source path does not exist: /var/lib/gantry/datasets/coco/3";
        sim.fail_next("create_container", ExecError::Failed(refusal.into()));
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;
        let (task, machine) = messages(&env, made.task_id, made.machine_id).await;
        assert!(task.contains("engine") && task.contains("logged"), "{task}");
        assert_private(&task);
        assert_private(&machine);
    }
}

gantry_testkit::timed_test! {
    async fn a_command_missing_from_the_image_is_named() {
        let (env, sim) = sim_env().await;
        let alice = env.user("alice", "ml-team").await;
        let start = "start container 4f2a failed (HTTP 400): failed to create task for container: failed to create shim task: \
                     OCI runtime create failed: runc create failed: unable to start container process: \
                     exec: \"/no/such/program\": stat /no/such/program: no such file or directory: unknown";
        sim.fail_next("start_container", ExecError::Failed(start.into()));
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;
        let (task, machine) = messages(&env, made.task_id, made.machine_id).await;
        assert!(task.contains("\"/no/such/program\" is not in its image"), "the user's or image's own command: {task}");
        assert!(!task.contains("OCI") && !task.contains("shim"), "{task}");
        assert_private(&machine);
    }
}

gantry_testkit::timed_test! {
    async fn a_missing_image_is_told_without_the_nodes_address() {
        let (env, sim) = sim_env().await;
        let alice = env.user("alice", "ml-team").await;
        let missing = "image gantry/devbox:latest is not present on node tcp://10.1.2.3:2376; build or load it first (Gantry never pulls)";
        sim.fail_next("create_container", ExecError::ImageMissing(missing.into()));
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;
        let (task, machine) = messages(&env, made.task_id, made.machine_id).await;
        assert!(task.contains("image is not on its node") && task.contains("never pulls"), "{task}");
        assert_private(&task);
        assert_private(&machine);
    }
}

gantry_testkit::timed_test! {
    async fn a_refused_snapshot_delete_names_no_engine_address() {
        let (env, sim) = sim_env().await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "source", 1)).await.unwrap().machine_id;
        env.drive().await;
        let (snapshot, task) = snapshots::request(&env.pool, &alice, m, "base").await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {task}")).await, "succeeded");

        sim.fail_next("remove_image", ExecError::Unavailable(UNREACHABLE.into()));
        let refused = snapshots::delete(&env.pool, &env.dispatcher.fleet, &alice, snapshot).await.unwrap_err();
        assert!(matches!(refused, PlatformError::Conflict(_)), "{refused:?}");
        let text = refused.to_string();
        assert!(text.contains("snapshot base was not deleted"), "{text}");
        assert_private(&text);
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {snapshot}")).await, "ready", "nothing changed");
    }
}

gantry_testkit::timed_test! {
    async fn a_node_address_the_engine_client_cannot_use_is_not_shown() {
        let env = env("simulated", 2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        // A docker node whose address names no transport Gantry speaks.
        sqlx::query("UPDATE nodes SET executor = 'docker', docker_endpoint = 'ftp://10.1.2.3:2376'").execute(&env.pool).await.unwrap();
        let made = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap();
        env.drive().await;
        let (task, machine) = messages(&env, made.task_id, made.machine_id).await;
        assert!(task.contains("node") && task.contains("logged"), "{task}");
        assert_private(&task);
        assert_private(&machine);
    }
}
