//! The Docker executor against the real local Docker Engine.
//!
//! Needs `bash scripts/dockerd.sh` and `bash scripts/demo-image.sh` first. If
//! the engine does not answer, the tests FAIL (a silently skipped suite hides
//! a broken setup); set `GANTRY_SKIP_DOCKER_TESTS=1` to skip them on purpose.
//! They use `DOCKER_HOST` when set, else the default local socket.
//! Every test uses its own random machine id and removes what it made, even
//! when it panics (see `Cleanup`).

use bollard::Docker;
use bytes::Bytes;
use futures_util::{stream, StreamExt};
use gantry_platform::executor::{
    inside::Upload, ContainerStatus, DockerExecutor, ExecError, Executor, Limits, MachineSpec, VolumeInfo, DATA_MOUNT,
    LABEL_GROUP, LABEL_INSTANCE, LABEL_MACHINE, LABEL_MANAGED, LABEL_OWNER, LABEL_TASK,
};
use std::time::Duration;

const IMAGE: &str = "gantry/devbox:latest";

struct Env {
    ex: Executor,
    docker: Docker,
    /// Holds the loop-volume image files of this test.
    _dir: tempfile::TempDir,
    /// A share of the host's loop devices (see `engine::loop_devices`).
    _devices: tokio::sync::RwLockReadGuard<'static, ()>,
}

/// `None` only when skipping was asked for; an engine that does not answer
/// or a missing demo image fails the test with what to run.
async fn engine(test: &str) -> Option<Env> {
    if std::env::var("GANTRY_SKIP_DOCKER_TESTS").as_deref() == Ok("1") {
        eprintln!("SKIPPED {test}: GANTRY_SKIP_DOCKER_TESTS=1 (Docker executor not tested)");
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    // Same engine the docker CLI would use; "" is the default local socket.
    let endpoint = std::env::var("DOCKER_HOST").unwrap_or_default();
    let ex = Executor::Docker(DockerExecutor::connect_with_volume_dir(&endpoint, dir.path()).expect("connect"));
    if let Err(e) = ex.ping().await {
        panic!("{e}\nThe Docker Engine is not answering: run `bash scripts/dockerd.sh` (then `bash scripts/demo-image.sh`), or set GANTRY_SKIP_DOCKER_TESTS=1 to skip these tests.");
    }
    let docker = Docker::connect_with_defaults().expect("bollard").negotiate_version().await.expect("negotiate");
    if docker.inspect_image(IMAGE).await.is_err() {
        panic!("image {IMAGE} is missing: run `bash scripts/demo-image.sh`");
    }
    let _devices = gantry_testkit::engine::loop_devices().read().await;
    Some(Env { ex, docker, _dir: dir, _devices })
}

fn spec(tag: &str) -> MachineSpec {
    let r = rand::random::<u32>() % 1_000_000_000;
    let machine_id = 1_000_000_000 + r as i64;
    MachineSpec {
        instance: format!("t{r}"),
        machine_id,
        task_id: 7_000_000_000 + r as i64,
        name: format!("{tag}-{r}"),
        owner: "alice".into(),
        group: "ml-team".into(),
        image: IMAGE.into(),
        gpu_uuids: vec![
            "GPU-0a1b2c3d-0000-0000-0000-000000000001".into(),
            "GPU-0a1b2c3d-0000-0000-0000-000000000002".into(),
        ],
        gpu_indexes: vec![0, 1],
        volume_name: format!("gantry-test-v{machine_id}"),
        volume_size_gb: 1,
        limits: Limits { cpu_millis: 1500, memory_mb: 256, pids: 128, root_disk_mb: 0 },
        command: None,
        mounts: Vec::new(),
    }
}

/// Removes the test's container and volume on drop, also after a panic. Drop
/// cannot await, so it runs the async cleanup on a runtime of its own thread.
struct Cleanup {
    ex: Executor,
    container: String,
    volume: String,
}

impl Cleanup {
    fn new(env: &Env, spec: &MachineSpec) -> Self {
        Cleanup { ex: env.ex.clone(), container: spec.container_name(), volume: spec.volume_name.clone() }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (ex, c, v) = (self.ex.clone(), self.container.clone(), self.volume.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                if let Err(e) = ex.remove_container(&c).await {
                    eprintln!("cleanup: {e}");
                }
                if let Err(e) = ex.remove_volume(&v).await {
                    eprintln!("cleanup: {e}");
                }
            })
        })
        .join();
    }
}

/// ensure_volume + create + start, as the create task does.
async fn create_running(env: &Env, spec: &MachineSpec) -> (VolumeInfo, String) {
    let vol = env.ex.ensure_volume(spec).await.expect("ensure_volume");
    let again = env.ex.ensure_volume(spec).await.expect("ensure_volume is idempotent");
    assert_eq!(again.size_enforced, vol.size_enforced);
    let c = env.ex.create_container(spec).await.expect("create_container");
    env.ex.start_container(&c.id).await.expect("start_container");
    (vol, c.id)
}

async fn sh(env: &Env, id: &str, script: &str) -> String {
    let (code, out) = env.ex.exec(id, &["sh", "-c", script]).await.expect("exec");
    assert_eq!(code, 0, "`{script}` failed: {out}");
    out.trim().to_string()
}

gantry_testkit::timed_test! {
    async fn create_runs_container_with_labels_volume_hostname_and_gpu_env() {
        let Some(env) = engine("create").await else { return };
        let spec = spec("create");
        let _cleanup = Cleanup::new(&env, &spec);
        let (vol, id) = create_running(&env, &spec).await;
        eprintln!("volume {} size_enforced={} mountpoint={:?}", vol.name, vol.size_enforced, vol.mountpoint);

        let state = env.ex.inspect_container(&id).await.unwrap();
        assert_eq!(state.status, ContainerStatus::Running);
        assert!(state.started_at.is_some());

        let raw = env.docker.inspect_container(&id, None).await.unwrap();
        let labels = raw.config.as_ref().and_then(|c| c.labels.clone()).unwrap_or_default();
        assert_eq!(labels.get(LABEL_MACHINE), Some(&spec.machine_id.to_string()));
        assert_eq!(labels.get(LABEL_TASK), Some(&spec.task_id.to_string()));
        assert_eq!(labels.get(LABEL_OWNER), Some(&spec.owner));
        assert_eq!(labels.get(LABEL_GROUP), Some(&spec.group));
        assert_eq!(labels.get(LABEL_MANAGED).map(String::as_str), Some("true"));
        assert_eq!(labels.get(LABEL_INSTANCE), Some(&spec.instance));
        assert_eq!(raw.name.as_deref(), Some(format!("/gantry-{}-m{}", spec.instance, spec.machine_id).as_str()));
        let host = raw.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        // Limits, no privilege gain, Docker's default capabilities only.
        assert_eq!((host.nano_cpus, host.memory, host.pids_limit), (Some(1_500_000_000), Some(256 * 1024 * 1024), Some(128)));
        assert_eq!(host.security_opt, Some(vec!["no-new-privileges:true".to_string()]));
        assert!(host.cap_add.unwrap_or_default().is_empty() && host.privileged != Some(true));

        let listed = env.ex.list_managed(&spec.instance).await.unwrap();
        let mine = listed.iter().find(|m| m.id == id).expect("list_managed includes the container");
        assert_eq!(mine.machine_id, Some(spec.machine_id));
        assert_eq!(mine.status, ContainerStatus::Running);

        assert_eq!(sh(&env, &id, "echo hello > /data/f && cat /data/f").await, "hello");
        assert_eq!(sh(&env, &id, "hostname").await, spec.name);
        assert_eq!(sh(&env, &id, "echo $NVIDIA_VISIBLE_DEVICES").await, spec.gpu_uuids.join(","));
        assert_eq!(sh(&env, &id, "echo $GANTRY_MACHINE").await, spec.name);
        let (code, out) = env.ex.exec(&id, &["sh", "-c", "echo out; echo err >&2; exit 3"]).await.unwrap();
        assert_eq!(code, 3);
        assert!(out.contains("out") && out.contains("err"), "combined output: {out:?}");

        let df = sh(&env, &id, "df -k /data | tail -n 1").await;
        eprintln!("df /data: {df}");
        if vol.size_enforced {
            // 1 GiB image: ext4 shows a bit under 1,048,576 KiB in total.
            let total: u64 = df.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("df total");
            assert!((900_000..=1_048_576).contains(&total), "loop volume size {total} KiB");
        }
    }
}

gantry_testkit::timed_test! {
    async fn restart_keeps_running_and_changes_started_at() {
        let Some(env) = engine("restart").await else { return };
        let spec = spec("restart");
        let _cleanup = Cleanup::new(&env, &spec);
        let (_, id) = create_running(&env, &spec).await;
        let before = env.ex.inspect_container(&id).await.unwrap();
        env.ex.restart_container(&id).await.expect("restart");
        let after = env.ex.inspect_container(&id).await.unwrap();
        assert_eq!(after.status, ContainerStatus::Running);
        assert!(after.started_at.is_some());
        assert_ne!(before.started_at, after.started_at, "started_at must change on restart");

        env.ex.stop_container(&id).await.expect("stop");
        env.ex.stop_container(&id).await.expect("stopping a stopped container is a no-op");
        // The demo image exits 0 on SIGTERM.
        assert_eq!(env.ex.inspect_container(&id).await.unwrap().status, ContainerStatus::Exited { code: 0 });
        let listed = env.ex.list_managed(&spec.instance).await.unwrap();
        assert_eq!(listed.iter().find(|m| m.id == id).map(|m| m.status), Some(ContainerStatus::Exited { code: 0 }));
    }
}

gantry_testkit::timed_test! {
    async fn reinstall_recreates_container_and_keeps_data() {
        let Some(env) = engine("reinstall").await else { return };
        let spec = spec("reinstall");
        let _cleanup = Cleanup::new(&env, &spec);
        let (_, old_id) = create_running(&env, &spec).await;
        sh(&env, &old_id, "echo precious > /data/keep.txt").await;

        let dup = env.ex.create_container(&spec).await.unwrap_err();
        assert!(matches!(dup, ExecError::Failed(ref m) if m.contains(&spec.container_name())), "{dup}");

        env.ex.remove_container(&old_id).await.expect("remove old container");
        let new = env.ex.create_container(&spec).await.expect("re-create");
        env.ex.start_container(&new.id).await.expect("start new");
        assert_ne!(new.id, old_id);
        assert_eq!(env.ex.inspect_container(&old_id).await.unwrap().status, ContainerStatus::Missing);
        assert_eq!(sh(&env, &new.id, "cat /data/keep.txt").await, "precious");
    }
}

gantry_testkit::timed_test! {
    async fn delete_removes_container_and_volume() {
        let Some(env) = engine("delete").await else { return };
        let spec = spec("delete");
        let _cleanup = Cleanup::new(&env, &spec);
        let (vol, id) = create_running(&env, &spec).await;

        env.ex.remove_container(&id).await.expect("remove container");
        env.ex.remove_container(&id).await.expect("remove is idempotent");
        env.ex.remove_volume(&spec.volume_name).await.expect("remove volume");
        env.ex.remove_volume(&spec.volume_name).await.expect("remove_volume is idempotent");

        assert_eq!(env.ex.inspect_container(&id).await.unwrap().status, ContainerStatus::Missing);
        match env.docker.inspect_volume(&spec.volume_name).await {
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {}
            other => panic!("volume should be gone, got {other:?}"),
        }
        assert!(!env.ex.list_managed(&spec.instance).await.unwrap().iter().any(|m| m.id == id));
        let image = env._dir.path().join(format!("{}.img", spec.volume_name));
        assert!(!image.exists(), "loop image {} must be deleted (size_enforced={})", image.display(), vol.size_enforced);
        assert!(matches!(env.ex.start_container(&id).await, Err(ExecError::NotFound(_))));
    }
}

gantry_testkit::timed_test! {
    async fn unreachable_engine_is_unavailable_and_names_the_endpoint() {
        // Needs no engine: a socket path that does not exist and a closed port.
        for endpoint in ["unix:///tmp/no-such-docker.sock", "tcp://127.0.0.1:1"] {
            let ex = Executor::Docker(DockerExecutor::connect(endpoint).expect("connect must not contact the engine"));
            let spec = spec("unreachable");
            for err in [ex.ensure_volume(&spec).await.unwrap_err(), ex.create_container(&spec).await.unwrap_err()] {
                eprintln!("{endpoint}: {err}");
                assert!(matches!(err, ExecError::Unavailable(_)), "{endpoint}: {err:?}");
                assert!(err.to_string().contains(endpoint), "message must name the endpoint: {err}");
                assert!(err.is_retryable());
            }
            assert!(matches!(ex.inspect_container("x").await, Err(ExecError::Unavailable(_))));
        }
    }
}

gantry_testkit::timed_test! {
    async fn missing_image_is_reported_and_never_pulled() {
        let Some(env) = engine("image-missing").await else { return };
        let mut spec = spec("noimage");
        spec.image = format!("gantry/devbox:missing-{}", rand::random::<u32>());
        let _cleanup = Cleanup::new(&env, &spec);
        let err = env.ex.create_container(&spec).await.unwrap_err();
        match &err {
            ExecError::ImageMissing(m) => {
                assert!(m.contains(&spec.image) && m.contains("build or load it first"), "{m}")
            }
            other => panic!("expected ImageMissing, got {other:?}"),
        }
        assert_eq!(env.ex.inspect_container(&spec.container_name()).await.unwrap().status, ContainerStatus::Missing);
        assert!(env.docker.inspect_image(&spec.image).await.is_err(), "the image must not have been pulled");
    }
}

gantry_testkit::timed_test! {
    async fn a_slow_upload_outlives_the_request_timeout_and_a_stalled_one_fails() {
        let Some(env) = engine("a_slow_upload_outlives_the_request_timeout_and_a_stalled_one_fails").await else { return };
        let spec = spec("upload");
        let _cleanup = Cleanup::new(&env, &spec);
        let (_vol, id) = create_running(&env, &spec).await;
        // The engine answers an archive PUT only after the whole body: a
        // 2 s request timeout must not cut a body that takes 4 s.
        let endpoint = std::env::var("DOCKER_HOST").unwrap_or_default();
        let ex = Executor::Docker(DockerExecutor::connect(&endpoint).unwrap().with_timeouts(Duration::from_secs(2), Duration::from_secs(1)));
        let body = stream::iter(0..8u8)
            .then(|i| async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                Ok(Bytes::from(vec![b'a' + i; 1000]))
            })
            .boxed();
        let up = Upload { root: DATA_MOUNT.into(), missing_dirs: vec!["up".into()], path: "up/slow.bin".into(), size: 8000, body };
        ex.upload(&id, up).await.expect("a slow upload is not cut by the request timeout");
        assert_eq!(sh(&env, &id, "wc -c < /data/up/slow.bin; head -c 1 /data/up/slow.bin; tail -c 1 /data/up/slow.bin").await, "8000\nah");

        // A body that stops sending fails after the idle timeout (1 s),
        // saying so, rather than holding the engine's connection.
        let body = stream::once(async { Ok(Bytes::from(vec![b'x'; 100])) }).chain(stream::pending()).boxed();
        let up = Upload { root: DATA_MOUNT.into(), missing_dirs: Vec::new(), path: "stalled.bin".into(), size: 1000, body };
        // Only the idle timer says "stalled" (the request timeout would
        // say it did not finish), so no clock is read here.
        let err = ex.upload(&id, up).await.expect_err("a stalled upload fails");
        assert!(matches!(err, ExecError::Failed(_)), "{err:?}");
        assert!(err.to_string().contains("the upload stalled: nothing was sent for 1 s"), "{err}");
        // The executor still works for other calls.
        let (code, out) = ex.exec(&id, &["sh", "-c", "wc -c < /data/up/slow.bin"]).await.expect("exec");
        assert_eq!((code, out.trim()), (0, "8000"));
    }
}
