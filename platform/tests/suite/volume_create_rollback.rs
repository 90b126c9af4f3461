//! A failed `create_volume` rolls back only what `ensure_volume` made: an
//! image that was there before (a kept volume whose Docker volume was
//! pruned) holds data and survives; so does any image when the engine's
//! answer was lost (it may have made the volume; the retry finds out).
//! The engine is a stub on a Unix socket that refuses or drops the create,
//! so the failure is certain; the loop devices are the host's (root).

use gantry_testkit::engine;

use gantry_platform::executor::{loopdev, DockerExecutor, ExecError, Executor, Limits, MachineSpec};
use std::{path::Path, sync::Arc};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{UnixListener, UnixStream},
};

/// How the stub answers `POST /volumes/create`.
#[derive(Clone, Copy)]
enum Create {
    Refuse,
    Drop,
}

/// An engine with no volumes whose creates fail; `mode` is read per request.
fn stub_engine(socket: &Path, mode: Arc<std::sync::Mutex<Create>>) {
    let listener = UnixListener::bind(socket).unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer(stream, mode.clone()));
        }
    });
}

/// One request per connection (`Connection: close`).
async fn answer(mut stream: UnixStream, mode: Arc<std::sync::Mutex<Create>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let path = target.split('?').next().unwrap_or("");
    let (status, body) = if path.ends_with("/version") {
        ("200 OK", r#"{"Version":"20.10.0","ApiVersion":"1.41","MinAPIVersion":"1.12"}"#)
    } else if path.ends_with("/volumes/create") {
        match *mode.lock().unwrap() {
            Create::Refuse => ("500 Internal Server Error", r#"{"message":"injected failure"}"#),
            Create::Drop => return,
        }
    } else if path.ends_with("/volumes") {
        ("200 OK", r#"{"Volumes":[],"Warnings":null}"#)
    } else {
        ("404 Not Found", r#"{"message":"no such volume"}"#)
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

fn spec(volume: &str) -> MachineSpec {
    MachineSpec {
        instance: "rollback".into(),
        machine_id: 1,
        task_id: 1,
        name: "m".into(),
        owner: "alice".into(),
        group: "ml-team".into(),
        image: engine::IMAGE.into(),
        gpu_uuids: Vec::new(),
        gpu_indexes: Vec::new(),
        volume_name: volume.into(),
        volume_size_gb: 1,
        limits: Limits::default(),
        command: None,
        mounts: Vec::new(),
    }
}

gantry_testkit::timed_test! {
    async fn a_failed_create_deletes_only_a_fresh_image_and_never_on_a_lost_answer() {
        if loopdev::enabled().is_err() {
            panic!("loop volumes need root with losetup and mkfs.ext4: {:?}", loopdev::enabled());
        }
        let _devices = engine::loop_devices().read().await;
        let dir = tempfile::tempdir().unwrap();
        let volumes = dir.path().join("volumes");
        let socket = dir.path().join("docker.sock");
        let mode = Arc::new(std::sync::Mutex::new(Create::Refuse));
        stub_engine(&socket, mode.clone());
        let exec = Executor::from(DockerExecutor::connect_with_volume_dir(&format!("unix://{}", socket.display()), &volumes).unwrap());

        // A kept volume's image, its Docker volume gone: the engine refuses
        // the new one. The data stays, and no empty volume replaces it.
        let kept = loopdev::provision(volumes.clone(), "gantry-rb-m1-data".into(), 1).await.unwrap();
        let out = std::process::Command::new("losetup").arg(format!("--detach={}", kept.device)).output().unwrap();
        assert!(out.status.success());
        let result = exec.ensure_volume(&spec("gantry-rb-m1-data")).await;
        assert!(kept.image.exists(), "an image that was there before is never deleted by a failed create");
        match result {
            Err(ExecError::Failed(why)) => assert!(why.contains("existing image"), "{why}"),
            other => panic!("refused over an existing image: {other:?}"),
        }

        // The engine's answer is lost: it may have made the volume, so
        // even a fresh image stays for the retry.
        *mode.lock().unwrap() = Create::Drop;
        let lost = loopdev::image_path(&volumes, "gantry-rb-m2-data");
        let result = exec.ensure_volume(&spec("gantry-rb-m2-data")).await;
        assert!(lost.exists(), "kept for the retry");
        assert!(matches!(result, Err(ExecError::Unavailable(_))), "a lost answer is retryable: {result:?}");

        // A fresh image the engine refused: rolled back (then the plain
        // volume is refused too).
        *mode.lock().unwrap() = Create::Refuse;
        let refused = loopdev::image_path(&volumes, "gantry-rb-m3-data");
        assert!(exec.ensure_volume(&spec("gantry-rb-m3-data")).await.is_err());
        assert!(!refused.exists(), "a fresh image is rolled back");

        for image in [kept.image, lost] {
            loopdev::release(image).await.unwrap();
        }
    }
}
