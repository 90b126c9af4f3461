//! The disk watcher on the real local Docker Engine (vfs here: the engine
//! cannot enforce a size, so the watcher does): a machine that writes
//! past its group's limit outside /data is warned, then stopped, saying
//! why; what was written in /data does not count.

use crate::disk_watch::set_root_limit;
use crate::reclaim_common::{events, machine_state};
use gantry_core::task::TaskKind;
use gantry_platform::{
    disk,
    executor::ContainerStatus,
    machines::{self, OperationRequest},
};
use gantry_testkit::engine;

gantry_testkit::timed_test! {
    async fn a_machine_writing_past_its_limit_outside_data_is_stopped_on_docker() {
        let env = engine::docker_env(4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        set_root_limit(&env, 20).await;
        let made = env.admissions.create(env.create(&alice, "filler", 1)).await.unwrap();
        env.drive().await;
        let m = made.machine_id;
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        let c = env.text(&format!("SELECT container_id FROM machines WHERE id = {m}")).await;
        let ex = env.executor().await;
        let write = |path: &'static str, mb: u32| {
            let ex = ex.clone();
            let c = c.clone();
            async move {
                let cmd = format!("dd if=/dev/zero of={path} bs=1000000 count={mb} 2>/dev/null && sync");
                let (code, out) = ex.exec(&c, &["sh", "-c", &cmd]).await.unwrap();
                assert_eq!(code, 0, "{out}");
            }
        };

        // 40 MB in /data: the data volume, not the machine's own filesystem.
        write("/data/big", 40).await;
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(r, disk::Report::default(), "/data does not count");
        let first = env.scalar(&format!("SELECT root_disk_bytes FROM machines WHERE id = {m}")).await;
        assert!(first < 1_000_000, "the engine's SizeRw of a fresh machine: {first}");

        write("/fill-1", 19).await;
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!((r.warned.len(), r.stopped.len()), (1, 0), "{r:?}");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");

        write("/fill-2", 11).await;
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(r.stopped.len(), 1, "{r:?}");
        let (state, message) = machine_state(&env.pool, m).await;
        assert_eq!(state, "stopped");
        assert!(message.starts_with("stopped: its filesystem outside /data used 30."), "{message}");
        assert!(message.ends_with(" MB of its 20 MB limit"), "{message}");
        assert!(matches!(ex.inspect_container(&c).await.unwrap().status, ContainerStatus::Exited { .. }));
        let kinds: Vec<String> = events(&env.pool, m).await.into_iter().map(|(k, _)| k).collect();
        assert_eq!(kinds, ["disk_warning", "disk_stopped"]);

        // Cleaned up: the delete removes the container and the volume.
        let volume = env.text(&format!("SELECT volume_name FROM machines WHERE id = {m}")).await;
        let request = OperationRequest { machine_id: m, kind: TaskKind::Delete, keep_volume: false };
        machines::request_operation(&env.pool, &alice, request).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "deleted");
        assert_eq!(ex.inspect_container(&c).await.unwrap().status, ContainerStatus::Missing);
        assert!(!ex.list_managed_volumes(&machines::instance_id(&env.pool).await.unwrap()).await.unwrap().contains(&volume));
    }
}

gantry_testkit::timed_test! {
    async fn the_local_engines_free_disk_is_measured_and_a_gone_container_has_no_size() {
        let env = engine::docker_env(1, 1).await;
        let ex = env.executor().await;
        let (free, total) = ex.disk_space().await.unwrap().expect("a local engine's disk can be measured");
        assert!(free > 0 && free <= total, "{free} of {total}");
        gantry_platform::nodes::monitor_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let recorded = env.scalar(&format!("SELECT disk_total_bytes FROM nodes WHERE id = {}", env.node_id)).await;
        assert_eq!(recorded, total, "the node monitor records it");
        assert_eq!(ex.root_disk_bytes("gantry-no-such-container").await.unwrap(), None);
    }
}
