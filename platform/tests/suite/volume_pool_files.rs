//! The volume pool's files on their own: claims racing on one directory
//! each get a different image or none, a claim never replaces an image
//! that is there, the disk budget bounds what is made, a partial left by a
//! dead maker is never claimed and is swept, and an image claimed by a
//! create that then died is its machine's on the retry or the collector's
//! once nothing names it — never the pool's again.

use crate::volume_pool_docker::{loops_under, pool_uuids, uuid};
use gantry_testkit::engine;

use gantry_platform::{
    executor::loopdev,
    machines,
    volume_pool::{self, PoolConfig},
};
use std::path::PathBuf;

fn cfg(dir: PathBuf, per_class: usize, budget_bytes: u64) -> PoolConfig {
    PoolConfig { volume_dir: dir, classes: vec![1], per_class, budget_bytes }
}

async fn fill(c: &PoolConfig) -> usize {
    let c = c.clone();
    tokio::task::spawn_blocking(move || volume_pool::fill(&c)).await.unwrap().unwrap()
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn racing_claims_get_different_images_within_the_budget_and_never_replace_one() {
        loopdev::enabled().expect("pool images are made with mkfs.ext4 as root");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("volumes");
        assert_eq!(fill(&cfg(dir.clone(), 0, 1 << 30)).await, 0, "a pool of 0 makes nothing");
        assert_eq!(fill(&cfg(dir.clone(), 4, 0)).await, 0, "a budget of 0 makes nothing");
        assert_eq!(fill(&cfg(dir.clone(), 1, 1 << 30)).await, 1);
        let each = volume_pool::images(&dir)[0].allocated;
        assert!(each > 0 && each < 1 << 30, "sparse: {each} bytes");

        // Room for three and a half: three are made, and the pool stays within it.
        let budget = each * 7 / 2;
        assert_eq!(fill(&cfg(dir.clone(), 10, budget)).await, 2);
        let pool = volume_pool::images(&dir);
        assert_eq!(pool.len(), 3);
        assert!(pool.iter().map(|i| i.allocated).sum::<u64>() <= budget);
        let pooled = pool_uuids(&dir);

        // Eight claims at once for three images.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let claims: Vec<_> = (0..8)
            .map(|i| {
                let (dir, barrier) = (dir.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let dest = loopdev::image_path(&dir, &format!("racer-{i}"));
                    barrier.wait();
                    volume_pool::claim(&dir, 1, &dest).unwrap().then_some(dest)
                })
            })
            .collect();
        let won: Vec<PathBuf> = claims.into_iter().filter_map(|t| t.join().unwrap()).collect();
        assert_eq!(won.len(), 3, "each image to exactly one claim: {won:?}");
        let mut got: Vec<String> = won.iter().map(|p| uuid(p)).collect();
        got.sort();
        got.dedup();
        assert_eq!(got.len(), 3, "three different images");
        assert!(got.iter().all(|u| pooled.contains(u)));
        assert!(volume_pool::images(&dir).is_empty());

        // A claim never replaces an image that is there (a kept volume's data).
        assert_eq!(fill(&cfg(dir.clone(), 1, 1 << 30)).await, 1);
        let kept = loopdev::image_path(&dir, "kept");
        std::fs::write(&kept, b"someone's data").unwrap();
        assert!(volume_pool::claim(&dir, 1, &kept).is_err());
        assert_eq!(std::fs::read(&kept).unwrap(), b"someone's data");
        assert_eq!(volume_pool::images(&dir).len(), 1, "the pool keeps its image");
        assert_eq!(volume_pool::claim(&dir, 2, &loopdev::image_path(&dir, "other-size")), Ok(false), "no image of that size");
        assert_eq!(loops_under(tmp.path()), Vec::<String>::new());
    }
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_dead_makers_partial_is_swept_and_a_dead_creates_claim_is_its_machines_or_collected() {
        loopdev::enabled().expect("loop volumes need root with losetup and mkfs.ext4");
        let env = engine::docker_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let volumes = env.dir.path().join("volumes");
        let pool_cfg = cfg(volumes.clone(), 2, 1 << 30);

        // A maker that died mid-mkfs: its partial is never claimed, and the sweep deletes it.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::create_dir_all(volume_pool::pool_dir(&volumes)).unwrap();
        let partial = volume_pool::pool_dir(&volumes).join(format!("1g-{dead}-1.img.partial"));
        std::fs::File::create(&partial).unwrap().set_len(1 << 30).unwrap();
        assert_eq!(volume_pool::claim(&volumes, 1, &volumes.join("x.img")), Ok(false), "a partial is never handed out");
        assert_eq!(volume_pool::sweep(&pool_cfg), 1);
        assert!(!partial.exists());

        // A create claimed an image, then its process died before attaching
        // it: the retry uses that image (its own), the pool keeps the rest.
        assert_eq!(fill(&pool_cfg).await, 2);
        let pooled = pool_uuids(&volumes);
        let made = env.admissions.create(env.create(&alice, "retried", 1)).await.unwrap();
        let m = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
        let image = loopdev::image_path(&volumes, &m.volume_name);
        assert!(volume_pool::claim(&volumes, 1, &image).unwrap());
        let claimed = uuid(&image);
        env.drive().await;
        let m = machines::machine_detail(&env.pool, &alice, made.machine_id).await.unwrap();
        assert!(m.volume_enforced, "{}", m.message);
        assert_eq!(uuid(&image), claimed, "the retry attached the claimed image");
        assert_eq!(pool_uuids(&volumes).len(), 1, "and took no other");
        assert!(pooled.contains(&claimed) && !pool_uuids(&volumes).contains(&claimed));

        // A claim whose machine is gone: young, it is left alone (its
        // create may be under way); once old, the collector removes it.
        let instance = machines::instance_id(&env.pool).await.unwrap();
        let orphan = loopdev::image_path(&volumes, &machines::volume_name(&instance, 9999));
        assert!(volume_pool::claim(&volumes, 1, &orphan).unwrap());
        gantry_platform::reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(orphan.exists(), "the claim counts as new: the collector waits");
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&orphan).unwrap().set_modified(hour_ago).unwrap();
        let report = gantry_platform::reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(!orphan.exists(), "collected: {report:?}");
        assert!(volume_pool::images(&volumes).is_empty(), "never back in the pool");

        let req = machines::OperationRequest { machine_id: m.id, kind: gantry_core::task::TaskKind::Delete, keep_volume: false };
        machines::request_operation(&env.pool, &alice, req).await.unwrap();
        env.drive().await;
        assert!(!image.exists());
        assert_eq!(loops_under(env.dir.path()), Vec::<String>::new(), "no loop device left");
    }
}
