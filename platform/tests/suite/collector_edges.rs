//! The collector on an engine two node rows name (a node renamed at start,
//! an engine added twice before that was refused): visiting one node must
//! not remove the other node's live containers.

use gantry_platform::{
    cluster::{self, NodeRegistration},
    executor::{Executor, SimulatedExecutor},
    reconcile,
};
use gantry_testkit::engine::env;

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

// A create that died between making its block volume's image (attached to a
// loop device) and creating the Docker volume, then was cancelled rather
// than resumed: nothing but the image names the volume. The collector
// removes that image and frees its device; images a live machine or a kept
// volume names, young ones (a create in progress elsewhere) and files not
// named as Gantry names them stay.
gantry_testkit::timed_test! {
    async fn the_block_image_of_a_create_cancelled_after_a_crash_is_collected() {
        use gantry_testkit::engine::docker_env;
        use gantry_core::task::TaskKind;
        use gantry_platform::{
            executor::loopdev,
            machines::{self, OperationRequest},
            transitions,
        };
        if loopdev::enabled().is_err() {
            panic!("loop volumes need root with losetup and mkfs.ext4: {:?}", loopdev::enabled());
        }
        let env = docker_env(3, 3).await;
        let dir = env.dir.path().join("volumes");
        let alice = env.user("alice", "ml-team").await;
        let detail = |id: i64| machines::machine_detail(&env.pool, &alice, id);

        let live = env.admissions.create(env.create(&alice, "lives", 1)).await.unwrap().machine_id;
        let kept = env.admissions.create(env.create(&alice, "kept", 1)).await.unwrap().machine_id;
        env.drive().await;
        let live = detail(live).await.unwrap();
        assert!(live.volume_enforced, "a block volume: {}", live.message);
        let kept_name = detail(kept).await.unwrap().volume_name;
        machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: kept, kind: TaskKind::Delete, keep_volume: true })
            .await
            .unwrap();
        env.drive().await;
        assert_eq!(machines::list_kept_volumes(&env.pool, &alice).await.unwrap().len(), 1);

        // The create dies at "preparing the data volume", after the image
        // was made and attached (what `ensure_volume` does first), before
        // the Docker volume; it is then cancelled instead of resumed.
        let crashed = env.admissions.create(env.create(&alice, "crashed", 1)).await.unwrap();
        assert!(env.drive_dying_at(1).await);
        let m = detail(crashed.machine_id).await.unwrap();
        let lv = loopdev::provision(dir.clone(), m.volume_name.clone(), m.volume_size_gb).await.unwrap();
        env.expire_all_leases().await;
        transitions::task::cancel(&env.pool, &alice, crashed.task_id).await.unwrap();
        assert_eq!(detail(crashed.machine_id).await.unwrap().state, gantry_core::task::MachineState::Deleted);
        assert_eq!(loopdev::attached_devices(&lv.image).unwrap(), vec![lv.device.clone()]);

        // Lookalikes that are not Gantry's (another installation's, odd
        // names), and an orphan of a create that may still be under way.
        let instance = machines::instance_id(&env.pool).await.unwrap();
        let foreign = ["gantry-otherinst-m1-data.img", "notes.img", &format!("gantry-{instance}-mx-data.img")];
        for name in foreign {
            std::fs::write(dir.join(name), b"not ours").unwrap();
        }
        // A Docker volume of that name, though unlabelled: still in use.
        let docker = bollard::Docker::connect_with_defaults().unwrap().negotiate_version().await.unwrap();
        let unlabelled = machines::volume_name(&instance, 9998);
        docker.create_volume(bollard::models::VolumeCreateRequest { name: Some(unlabelled.clone()), ..Default::default() }).await.unwrap();
        std::fs::write(loopdev::image_path(&dir, &unlabelled), b"a Docker volume's").unwrap();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            std::fs::File::options().write(true).open(e.path()).unwrap().set_modified(hour_ago).unwrap();
        }
        let young = loopdev::image_path(&dir, &machines::volume_name(&instance, 9999));
        std::fs::write(&young, b"being formatted").unwrap();

        let report = gantry_platform::reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(report.not_collected.is_empty(), "{report:?}");
        assert!(!lv.image.exists(), "the orphan image is removed: {report:?}");
        let backing = std::process::Command::new("losetup").args(["--noheadings", "--output", "BACK-FILE", "--", &lv.device]).output().unwrap();
        assert!(!String::from_utf8_lossy(&backing.stdout).contains(&m.volume_name), "its loop device {} is detached", lv.device);
        assert!(
            report.images_collected.iter().any(|w| w.contains(&m.volume_name) && w.contains(&lv.device)),
            "logged with its device: {report:?}"
        );
        assert_eq!(report.images_collected.len(), 1, "{report:?}");

        for name in [&live.volume_name, &kept_name] {
            let image = loopdev::image_path(&dir, name);
            assert!(image.exists(), "{name} stays");
            assert_eq!(loopdev::attached_devices(&image).unwrap().len(), 1, "{name} stays attached");
        }
        assert!(young.exists(), "a young image stays");
        assert!(loopdev::image_path(&dir, &unlabelled).exists(), "an image a Docker volume is named for stays");
        docker.remove_volume(&unlabelled, None::<bollard::query_parameters::RemoveVolumeOptions>).await.unwrap();
        for name in foreign {
            assert!(dir.join(name).exists(), "{name} stays");
        }
        let (_, out) = env.executor().await.exec(live.container_id.as_deref().unwrap(), &["sh", "-c", "echo ok > /data/f && cat /data/f"]).await.unwrap();
        assert_eq!(out, "ok\n");

        // Clean up the live machine's and the kept volume's devices.
        machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: live.id, kind: TaskKind::Delete, keep_volume: false })
            .await
            .unwrap();
        env.drive().await;
        let kept_id = machines::list_kept_volumes(&env.pool, &alice).await.unwrap()[0].id;
        machines::delete_kept_volume(&env.pool, &alice, kept_id).await.unwrap();
        gantry_platform::reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(!loopdev::image_path(&dir, &kept_name).exists());
    }
}
