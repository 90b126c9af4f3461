//! `gantry serve` keeps its node's volume pool full: on a Docker node with
//! a 1 GB class of two, the pool fills after the start; a machine created
//! through the page's server function gets one of its images (its
//! filesystem UUID: nothing was formatted on the create's path), the pool
//! refills behind it, and after a stop nothing is left attached.

use crate::common;
use gantry_platform::{
    executor::{loopdev, DockerExecutor},
    volume_pool,
};
use std::path::Path;

fn uuid(image: &Path) -> String {
    let out =
        std::process::Command::new("blkid").args(["-s", "UUID", "-o", "value", "--"]).arg(image).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn ready(volumes: &Path) -> Vec<String> {
    volume_pool::images(volumes).iter().filter(|i| !i.partial).map(|i| uuid(&i.path)).collect()
}

/// Another process fills the pool: its directory is the only thing to watch.
async fn until_ready(volumes: &Path, n: usize) -> Vec<String> {
    loop {
        let now = ready(volumes);
        if now.len() >= n {
            return now;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

gantry_testkit::timed_test! {
    limit = 180;
    async fn serve_fills_the_pool_and_a_create_takes_an_image_from_it() {
        loopdev::enabled().expect("loop volumes need root with losetup and mkfs.ext4");
        let dir = tempfile::tempdir().unwrap();
        let volumes = dir.path().join("volumes");
        let env = [
            ("GANTRY_EXECUTOR", "docker"),
            ("GANTRY_SIM_GPUS", "2"),
            ("GANTRY_VOLUME_POOL_SIZES_GB", "1"),
            ("GANTRY_VOLUME_POOL_SIZE", "2"),
        ];
        let mut server = common::child::spawn(dir.path(), "log", "pool-admin-pass-1", &env).await;
        let pooled = until_ready(&volumes, 2).await;
        assert_eq!(pooled.len(), 2, "no more than the class's count");

        let res = server
            .client
            .post(format!("http://{}/api/create_machine", server.addr))
            .form(&[("name", "pooled"), ("image_id", ""), ("gpu_count", "1"), ("gpu_model", ""), ("volume_size_gb", "1")])
            .send()
            .await
            .unwrap();
        let body = res.text().await.unwrap();
        let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["machine_id"].as_i64().unwrap_or_else(|| panic!("{body}"));
        let db = gantry_platform::db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
        let (volume, container, enforced) = loop {
            let (state, volume, container, enforced): (String, String, Option<String>, bool) =
                sqlx::query_as("SELECT state, volume_name, container_id, volume_enforced FROM machines WHERE id = ?")
                    .bind(id)
                    .fetch_one(&db)
                    .await
                    .unwrap();
            assert!(state != "failed", "the create failed");
            if state == "running" {
                break (volume, container.unwrap(), enforced);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert!(enforced, "a block volume");
        let image = loopdev::image_path(&volumes, &volume);
        let claimed = uuid(&image);
        assert!(pooled.contains(&claimed), "the volume is a pool image: {claimed} of {pooled:?}");
        let refilled = until_ready(&volumes, 2).await;
        assert!(!refilled.contains(&claimed), "refilled with a fresh image");

        let status = server.terminate().await;
        assert!(status.success(), "gantry serve ended with {status}");
        for i in volume_pool::images(&volumes) {
            assert!(loopdev::attached_devices(&i.path).unwrap().is_empty(), "pooled images are never attached");
        }
        // The machine's container, Docker volume and loop device go as a delete's would.
        let exec = DockerExecutor::connect_with_volume_dir("", &volumes).unwrap();
        exec.remove_container(&container).await.unwrap();
        exec.remove_volume(&volume).await.unwrap();
        assert!(!image.exists());
    }
}
