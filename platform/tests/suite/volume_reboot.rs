//! Block volumes across a host reboot, simulated: the loop device of a
//! machine's volume is detached behind Gantry's back. The next start
//! re-attaches the right image (the data is still there); a device that now
//! holds another file is refused, never mounted. It has the host's loop
//! devices to itself (`engine::docker_env_alone`), so no other test of the
//! suite grabs the freed device in between.
//!
//! And the other side of a reboot: a new volume never takes a device a
//! stopped machine's volume still names, and the files routes' check
//! (`Executor::check_volumes`) re-attaches a stopped machine's own image
//! before the engine mounts it, or refuses a device holding another file.

use gantry_testkit::engine;

use gantry_core::task::TaskKind;
use gantry_platform::{
    executor::{
        inside::{read_up_to, Download},
        loopdev,
    },
    machines::{self, OperationRequest},
};
use std::process::Command;

fn losetup(args: &[&str]) -> String {
    let out = Command::new("losetup").args(args).output().unwrap();
    assert!(out.status.success(), "losetup {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

gantry_testkit::timed_test! {
    async fn a_start_reattaches_its_own_image_and_refuses_a_device_holding_another() {
        if loopdev::enabled().is_err() {
            panic!("loop volumes need root with losetup and mkfs.ext4: {:?}", loopdev::enabled());
        }
        let env = engine::docker_env_alone(1, 1).await;
        let alice = env.user("alice", "ml-team").await;
        let exec = env.dispatcher.fleet.executor(&env.pool, env.node_id).await.unwrap();
        let made = env.admissions.create(env.create(&alice, "rebooted", 1)).await.unwrap();
        env.drive().await;
        let m = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
        assert!(m.volume_enforced, "a block volume: {}", m.message);
        let container = m.container_id.clone().unwrap();
        assert_eq!(exec.exec(&container, &["sh", "-c", "echo survived > /data/f"]).await.unwrap().0, 0);
        let docker = bollard::Docker::connect_with_defaults().unwrap().negotiate_version().await.unwrap();
        let device = docker.inspect_volume(&m.volume_name).await.unwrap().options["device"].clone();
        let image = loopdev::image_path(&env.dir.path().join("volumes"), &m.volume_name);
        let restart = || machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: made.machine_id, kind: TaskKind::Restart, keep_volume: false });

        // "Reboot": the container stops, the device is detached.
        exec.stop_container(&container).await.unwrap();
        losetup(&[&format!("--detach={device}")]);
        assert!(loopdev::attached_devices(&image).unwrap().is_empty());
        let task = restart().await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {task}")).await, "succeeded");
        assert_eq!(loopdev::attached_devices(&image).unwrap(), vec![device.clone()], "re-attached to the recorded device");
        let (_, out) = exec.exec(&container, &["cat", "/data/f"]).await.unwrap();
        assert_eq!(out, "survived\n");

        // After the next "reboot" another file got that device first.
        exec.stop_container(&container).await.unwrap();
        losetup(&[&format!("--detach={device}")]);
        let stranger = env.dir.path().join("stranger.img");
        std::fs::File::create(&stranger).unwrap().set_len(16 << 20).unwrap();
        losetup(&["--", &device, stranger.to_str().unwrap()]);
        let task = restart().await.unwrap();
        env.drive().await;
        let (state, message): (String, String) =
            sqlx::query_as("SELECT state, message FROM tasks WHERE id = ?").bind(task).fetch_one(&env.pool).await.unwrap();
        assert_eq!(state, "failed");
        // The device and image paths go to the log; the owner reads a plain reason.
        assert!(message.contains("data volume could not be mounted") && !message.contains(&device), "{message}");
        assert!(loopdev::attached_devices(&image).unwrap().is_empty(), "our image was not attached elsewhere either");
        losetup(&[&format!("--detach={device}")]);

        // Delete cleans up the rest.
        machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: made.machine_id, kind: TaskKind::Delete, keep_volume: false })
            .await
            .unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", made.machine_id)).await, "deleted");
        assert!(!image.exists(), "image file removed");
    }
}

/// The device the engine mounts for this volume.
async fn recorded_device(volume: &str) -> String {
    let docker = bollard::Docker::connect_with_defaults().unwrap().negotiate_version().await.unwrap();
    docker.inspect_volume(volume).await.unwrap().options["device"].clone()
}

gantry_testkit::timed_test! {
    async fn a_stopped_machines_device_is_never_handed_out_and_its_files_are_checked_first() {
        if loopdev::enabled().is_err() {
            panic!("loop volumes need root with losetup and mkfs.ext4: {:?}", loopdev::enabled());
        }
        let env = engine::docker_env_alone(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let exec = env.dispatcher.fleet.executor(&env.pool, env.node_id).await.unwrap();
        let volumes = env.dir.path().join("volumes");
        let made = env.admissions.create(env.create(&alice, "stopped", 1)).await.unwrap();
        env.drive().await;
        let a = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
        assert!(a.volume_enforced, "a block volume: {}", a.message);
        let container = a.container_id.clone().unwrap();
        assert_eq!(exec.exec(&container, &["sh", "-c", "echo mine > /data/f"]).await.unwrap().0, 0);
        let device = recorded_device(&a.volume_name).await;
        let image = loopdev::image_path(&volumes, &a.volume_name);

        // "Reboot": A stays stopped, its device is free — the lowest free
        // one, which `losetup -f` would hand to the next volume.
        exec.stop_container(&container).await.unwrap();
        losetup(&[&format!("--detach={device}")]);
        let other = env.admissions.create(env.create(&alice, "newcomer", 1)).await.unwrap();
        env.drive().await;
        let c = machines::machine_detail(&env.pool, &alice, other.machine_id).await.unwrap();
        assert!(c.volume_enforced, "a block volume: {}", c.message);
        assert_ne!(recorded_device(&c.volume_name).await, device, "a device another volume names is never handed out");
        assert_eq!(losetup(&["--list", "--noheadings", "--output", "BACK-FILE", "--", &device]), "", "A's device is still free");

        // A's Files tab: its own image goes back on its device first, and
        // the engine mounts A's data.
        exec.check_volumes(&container).await.unwrap().unwrap();
        assert_eq!(loopdev::attached_devices(&image).unwrap(), vec![device.clone()]);
        let Download::File { body, .. } = exec.download(&container, "/data/f").await.unwrap() else { panic!("a file") };
        assert_eq!(read_up_to(body, 64).await.unwrap(), b"mine\n");

        // Next "reboot", and another file got A's device first: refused,
        // nothing mounted.
        losetup(&[&format!("--detach={device}")]);
        let stranger = env.dir.path().join("stranger.img");
        std::fs::File::create(&stranger).unwrap().set_len(16 << 20).unwrap();
        losetup(&["--", &device, stranger.to_str().unwrap()]);
        match exec.check_volumes(&container).await {
            Ok(Err(why)) => assert!(why.contains(&format!("{device} now holds")) && why.contains("refusing to mount"), "{why}"),
            other => panic!("a device holding another file is refused: {other:?}"),
        }
        assert!(loopdev::attached_devices(&image).unwrap().is_empty(), "our image was not attached elsewhere either");
        losetup(&[&format!("--detach={device}")]);

        for id in [made.machine_id, other.machine_id] {
            machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: id, kind: TaskKind::Delete, keep_volume: false }).await.unwrap();
        }
        env.drive().await;
        assert!(!image.exists(), "image file removed");
    }
}
