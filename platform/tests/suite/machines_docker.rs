//! Dev machines through admission and the dispatcher on the real local
//! Docker Engine (`scripts/dockerd.sh`, `scripts/demo-image.sh`), and the
//! reconciler repairing drift. Fails when the engine does not answer.

use gantry_testkit::engine;

use engine::Env;
use gantry_core::task::TaskKind;
use gantry_platform::{
    accounts::User,
    executor::{
        ContainerStatus, DockerExecutor, Executor, MachineSpec, LABEL_GROUP, LABEL_INSTANCE, LABEL_MACHINE, LABEL_OWNER,
    },
    machines::{self, OperationRequest},
    reconcile,
};

async fn docker_env() -> Env {
    engine::docker_env(4, 4).await
}

async fn exec(env: &Env) -> Executor {
    env.executor().await
}

async fn container_of(env: &Env, machine_id: i64) -> String {
    env.text(&format!("SELECT container_id FROM machines WHERE id = {machine_id}")).await
}

async fn operate(env: &Env, user: &User, machine_id: i64, kind: TaskKind, keep_volume: bool) -> (String, String) {
    let task =
        machines::request_operation(&env.pool, user, OperationRequest { machine_id, kind, keep_volume }).await.unwrap();
    env.drive().await;
    sqlx::query_as("SELECT state, message FROM tasks WHERE id = ?").bind(task).fetch_one(&env.pool).await.unwrap()
}

gantry_testkit::timed_test! {
    async fn create_restart_reinstall_delete_on_docker() {
        let env = docker_env().await;
        let alice = env.user("alice", "ml-team").await;
        let ex = exec(&env).await;
        let made = env.admissions.create(env.create(&alice, "trainer", 2)).await.unwrap();
        env.drive().await;

        // create → running, labelled, volume mounted, GPUs pinned by env.
        let m = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
        assert_eq!(m.state, gantry_core::task::MachineState::Running, "{}", m.message);
        let first = container_of(&env, made.machine_id).await;
        let docker = bollard::Docker::connect_with_defaults().unwrap().negotiate_version().await.unwrap();
        let info = docker.inspect_container(&first, None::<bollard::query_parameters::InspectContainerOptions>).await.unwrap();
        let labels = info.config.unwrap().labels.unwrap();
        assert_eq!(labels[LABEL_MACHINE], made.machine_id.to_string());
        assert_eq!(labels[LABEL_OWNER], "alice");
        assert_eq!(labels[LABEL_GROUP], "ml-team");
        assert_eq!(labels[LABEL_INSTANCE], machines::instance_id(&env.pool).await.unwrap());
        let (code, out) = ex.exec(&first, &["sh", "-c", "hostname; echo $NVIDIA_VISIBLE_DEVICES; echo keep-me > /data/notes.txt"]).await.unwrap();
        assert_eq!(code, 0);
        let node_name = env.text(&format!("SELECT name FROM nodes WHERE id = {}", env.node_id)).await;
        assert_eq!(out, format!("trainer\nGPU-sim-{node_name}-0,GPU-sim-{node_name}-1\n"));

        // restart → still running, started again.
        let before = ex.inspect_container(&first).await.unwrap().started_at;
        assert_eq!(operate(&env, &alice, made.machine_id, TaskKind::Restart, false).await.0, "succeeded");
        let after = ex.inspect_container(&first).await.unwrap();
        assert_eq!(after.status, ContainerStatus::Running);
        assert_ne!(after.started_at, before, "the container was started again");

        // reinstall → new container, the data volume's file survives.
        assert_eq!(operate(&env, &alice, made.machine_id, TaskKind::Reinstall, false).await.0, "succeeded");
        let second = container_of(&env, made.machine_id).await;
        assert_ne!(second, first);
        assert_eq!(ex.inspect_container(&first).await.unwrap().status, ContainerStatus::Missing);
        let (_, out) = ex.exec(&second, &["cat", "/data/notes.txt"]).await.unwrap();
        assert_eq!(out, "keep-me\n");

        // delete → container and volume gone, quota refunded.
        let volume = m.volume_name.clone();
        let (state, message) = operate(&env, &alice, made.machine_id, TaskKind::Delete, false).await;
        assert_eq!((state.as_str(), message.as_str()), ("succeeded", "deleted; 2 GPU(s) returned to the group's quota"));
        assert_eq!(ex.inspect_container(&second).await.unwrap().status, ContainerStatus::Missing);
        assert!(docker.inspect_volume(&volume).await.is_err(), "volume {volume} removed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn engine_stopped_midway_gives_a_clear_failure() {
        let env = docker_env().await;
        let alice = env.user("alice", "ml-team").await;
        let made = env.admissions.create(env.create(&alice, "fragile", 1)).await.unwrap();
        env.drive().await;
        let container = container_of(&env, made.machine_id).await;

        // The node's engine goes away.
        env.use_executor(DockerExecutor::connect("unix:///tmp/gantry-no-engine.sock").unwrap().into());
        let task = machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: made.machine_id, kind: TaskKind::Restart, keep_volume: false })
            .await
            .unwrap();
        env.drive().await;
        let message = env.text(&format!("SELECT message FROM tasks WHERE id = {task}")).await;
        // The owner reads a plain reason; the endpoint goes to the log only.
        assert!(message.contains("did not answer") && message.contains("retry 2 of 5"), "{message}");
        assert!(!message.contains("gantry-no-engine.sock") && !message.contains("unix://"), "{message}");
        sqlx::query("UPDATE tasks SET attempts = 5, not_before = 0 WHERE id = ?").bind(task).execute(&env.pool).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {task}")).await, "failed");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "failed");

        // Clean up through the real engine again.
        let real: Executor = DockerExecutor::connect_with_volume_dir("", env.dir.path().join("volumes")).unwrap().into();
        real.remove_container(&container).await.unwrap();
        real.remove_volume(&machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap().volume_name).await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn reconciler_follows_containers_and_removes_orphans() {
        let env = docker_env().await;
        let alice = env.user("alice", "ml-team").await;
        let ex = exec(&env).await;
        let a = env.admissions.create(env.create(&alice, "stops", 1)).await.unwrap();
        let b = env.admissions.create(env.create(&alice, "vanishes", 1)).await.unwrap();
        env.drive().await;
        let (ca, cb) = (container_of(&env, a.machine_id).await, container_of(&env, b.machine_id).await);
        ex.stop_container(&ca).await.unwrap();
        ex.remove_container(&cb).await.unwrap();
        // A labelled container of this installation that no machine owns.
        let instance = machines::instance_id(&env.pool).await.unwrap();
        let stray = MachineSpec {
            instance,
            machine_id: 999_999,
            task_id: 0,
            name: "stray".into(),
            owner: "nobody".into(),
            group: "none".into(),
            image: engine::IMAGE.into(),
            gpu_uuids: vec![],
            gpu_indexes: vec![],
            volume_name: format!("{}-stray", machines::instance_id(&env.pool).await.unwrap()),
            volume_size_gb: 1,
            limits: Default::default(),
            command: None,
            mounts: Vec::new(),
        };
        let orphan = ex.create_container(&stray).await.unwrap();

        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(report.changes.contains(&"machine stops: running → stopped (container exited with code 0)".to_string()), "{report:?}");
        assert!(report.changes.iter().any(|c| c.starts_with("machine vanishes: running → failed (container vanished")), "{report:?}");
        assert_eq!(report.containers_collected.len(), 1, "{report:?}");
        assert_eq!(ex.inspect_container(&orphan.id).await.unwrap().status, ContainerStatus::Missing);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action LIKE 'reconcile.%'").await, 2);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'collect.container'").await, 1);

        // A second pass finds nothing new.
        let again = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(again.changes.is_empty() && again.containers_collected.is_empty(), "{again:?}");

        // Docker made the stray's volume on the fly, without Gantry's labels:
        // the collector only ever removes volumes labelled for this installation.
        ex.remove_volume(&stray.volume_name).await.unwrap();
        for (id, m) in [(a.machine_id, "stops"), (b.machine_id, "vanishes")] {
            let (state, _) = operate(&env, &alice, id, TaskKind::Delete, false).await;
            assert_eq!(state, "succeeded", "{m}");
        }
    }
}
