//! Stop and start on the real local Docker Engine: a file written in `/`
//! (the container's own filesystem, outside `/data`) and one in `/data`
//! are both there after the start; the GPUs go back at the stop. Every
//! container, volume and image the test made is removed at the end.

use crate::reclaim_common::{machine_state, task_outcome};
use gantry_testkit::engine;

use gantry_core::task::TaskKind;
use gantry_platform::{
    executor::ContainerStatus,
    machines::{self, OperationRequest},
    reclaim, reconcile,
};

gantry_testkit::timed_test! {
    async fn stop_and_start_keep_the_files_in_root_and_in_data() {
        let env = engine::docker_env(4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let ex = env.executor().await;
        let instance = machines::instance_id(&env.pool).await.unwrap();
        let m = env.admissions.create(env.create(&alice, "day-job", 2)).await.unwrap().machine_id;
        env.drive().await;
        let first = env.text(&format!("SELECT container_id FROM machines WHERE id = {m}")).await;
        let write = "echo in-data > /data/kept.txt && echo in-root > /kept-in-root.txt";
        assert_eq!(ex.exec(&first, &["sh", "-c", write]).await.unwrap().0, 0);
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2);

        let stop = reclaim::stop(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, stop).await;
        assert_eq!(state, "succeeded", "{message}");
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
        assert_eq!(ex.inspect_container(&first).await.unwrap().status, ContainerStatus::Missing, "container removed");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "GPUs freed");
        env.assert_quota_consistent().await;
        let image = env.text(&format!("SELECT s.image_ref FROM snapshots s JOIN machines m ON m.restore_snapshot_id = s.id WHERE m.id = {m}")).await;
        assert!(ex.image_info(&image).await.unwrap().is_some(), "its filesystem was committed to {image}");

        let start = reclaim::start(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, start).await;
        assert_eq!(state, "succeeded", "{message}");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        let second = env.text(&format!("SELECT container_id FROM machines WHERE id = {m}")).await;
        assert_ne!(second, first);
        assert_eq!(ex.exec(&second, &["cat", "/data/kept.txt"]).await.unwrap().1, "in-data\n");
        assert_eq!(ex.exec(&second, &["cat", "/kept-in-root.txt"]).await.unwrap().1, "in-root\n");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2);

        // Clean up: the machine (container and volume), then its restore
        // point, which the reconciler removes once the machine is deleted.
        let op = OperationRequest { machine_id: m, kind: TaskKind::Delete, keep_volume: false };
        let del = machines::request_operation(&env.pool, &alice, op).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(ex.image_info(&image).await.unwrap().is_none(), "image {image} left on the engine");
        assert!(ex.list_managed(&instance).await.unwrap().is_empty(), "a container was left on the engine");
        assert!(ex.list_managed_volumes(&instance).await.unwrap().is_empty(), "a volume was left on the engine");
        env.assert_quota_consistent().await;
    }
}
