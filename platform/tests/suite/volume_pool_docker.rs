//! Machines made from the volume pool on the real local engine: a create
//! takes a pre-formatted image (its filesystem UUID is the pool image's,
//! the pool has one fewer, nothing was formatted), two creates run at once
//! get two different images, the background loop refills what they took,
//! an empty pool (or a size it does not keep) falls back to formatting, and
//! a delete leaves no image, loop device or pool file behind.

use gantry_testkit::engine;

use gantry_core::task::TaskKind;
use gantry_platform::{
    dispatch,
    executor::loopdev,
    machines::{self, OperationRequest},
    volume_pool::{self, PoolConfig},
};
use std::path::Path;

/// The ext4 UUID of an image file.
pub fn uuid(image: &Path) -> String {
    let out =
        std::process::Command::new("blkid").args(["-s", "UUID", "-o", "value", "--"]).arg(image).output().unwrap();
    assert!(out.status.success(), "blkid {}: {}", image.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Ready (not partial) pool images' UUIDs.
pub fn pool_uuids(volume_dir: &Path) -> Vec<String> {
    volume_pool::images(volume_dir).iter().filter(|i| !i.partial).map(|i| uuid(&i.path)).collect()
}

/// Loop devices backed by any file under `dir`.
pub fn loops_under(dir: &Path) -> Vec<String> {
    let out = std::process::Command::new("losetup")
        .args(["--list", "--noheadings", "--output", "NAME,BACK-FILE"])
        .output()
        .unwrap();
    let dir = dir.to_string_lossy().into_owned();
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(&dir)).map(str::to_string).collect()
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn creates_take_pool_images_racing_ones_get_different_ones_and_the_pool_refills() {
        loopdev::enabled().expect("loop volumes need root with losetup and mkfs.ext4");
        let env = engine::docker_env(4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let volumes = env.dir.path().join("volumes");
        let cfg = PoolConfig { volume_dir: volumes.clone(), classes: vec![1], per_class: 2, budget_bytes: 1 << 30 };
        let detail = |id| machines::machine_detail(&env.pool, &alice, id);

        // Empty pool: the create formats its own image, as before.
        let first = env.admissions.create(env.create(&alice, "formatted", 1)).await.unwrap();
        env.drive().await;
        let first = detail(first.machine_id).await.unwrap();
        assert!(first.volume_enforced, "a block volume: {}", first.message);
        assert!(volume_pool::images(&volumes).is_empty(), "nothing pooled while the loop does not run");

        // Two images ready; two creates run at once.
        assert_eq!(tokio::task::spawn_blocking({ let c = cfg.clone(); move || volume_pool::fill(&c) }).await.unwrap(), Ok(2));
        let pooled = pool_uuids(&volumes);
        assert_eq!(pooled.len(), 2);
        assert!(volume_pool::images(&volumes).iter().all(|i| loopdev::attached_devices(&i.path).unwrap().is_empty()), "pooled images are not attached");
        let a = env.admissions.create(env.create(&alice, "ma", 1)).await.unwrap();
        let b = env.admissions.create(env.create(&alice, "mb", 1)).await.unwrap();
        let tasks = dispatch::claim(&env.pool, &env.dispatcher.owner, 16).await.unwrap();
        assert_eq!(tasks.len(), 2);
        futures_util::future::join_all(tasks.into_iter().map(|t| env.dispatcher.execute(t))).await;
        let (a, b) = (detail(a.machine_id).await.unwrap(), detail(b.machine_id).await.unwrap());
        let got: Vec<String> = [&a, &b].iter().map(|m| uuid(&loopdev::image_path(&volumes, &m.volume_name))).collect();
        assert!(a.volume_enforced && b.volume_enforced, "{} / {}", a.message, b.message);
        assert_ne!(got[0], got[1], "two creates never share an image");
        assert!(got.iter().all(|u| pooled.contains(u)), "both came from the pool (no mkfs): {got:?} of {pooled:?}");
        assert!(volume_pool::images(&volumes).is_empty(), "the pool gave both");
        assert_ne!(uuid(&loopdev::image_path(&volumes, &first.volume_name)), got[0]);
        // The machine really has its volume at /data, sized as asked.
        let (code, out) = env.executor().await.exec(a.container_id.as_deref().unwrap(), &["sh", "-c", "echo hi > /data/f && cat /data/f"]).await.unwrap();
        assert_eq!((code, out.as_str()), (0, "hi\n"));

        // The background loop refills the pool after the claims woke it.
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let stopped = async move {
            let _ = stopped.await;
        };
        let refill = tokio::spawn(volume_pool::run_until(cfg.clone(), std::time::Duration::from_secs(3600), stopped));
        while pool_uuids(&volumes).len() < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let refilled = pool_uuids(&volumes);
        assert!(refilled.iter().all(|u| !got.contains(u)), "fresh images, not the claimed ones");

        // A size the pool does not keep formats its own image; the pool stays as it is.
        let mut big = env.create(&alice, "two-gb", 1);
        big.volume_size_gb = 2;
        let big = env.admissions.create(big).await.unwrap();
        env.drive().await;
        let big = detail(big.machine_id).await.unwrap();
        assert!(big.volume_enforced, "{}", big.message);
        assert!(!refilled.contains(&uuid(&loopdev::image_path(&volumes, &big.volume_name))));
        assert_eq!(pool_uuids(&volumes), refilled);
        stop.send(()).unwrap();
        refill.await.unwrap();

        // Delete everything: no image, no loop device left; the pool's files go with the data dir.
        for m in [&first, &a, &b, &big] {
            let req = OperationRequest { machine_id: m.id, kind: TaskKind::Delete, keep_volume: false };
            machines::request_operation(&env.pool, &alice, req).await.unwrap();
        }
        env.drive().await;
        for m in [&first, &a, &b, &big] {
            assert!(!loopdev::image_path(&volumes, &m.volume_name).exists(), "{} removed", m.volume_name);
        }
        assert_eq!(loops_under(env.dir.path()), Vec::<String>::new(), "no loop device left");
    }
}
