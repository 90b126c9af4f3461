//! [`SimulatedExecutor`]: an in-memory stand-in for a Docker Engine.
//!
//! This is the mode for machines without Docker (PRODUCT D: "runs on one
//! machine with no setup"), for the benchmark, and for tests of the
//! dispatcher/reconciler logic. It follows the same state machine and error
//! kinds as [`DockerExecutor`](super::DockerExecutor): missing containers
//! give `NotFound` (or `Missing` from inspect), a second container with the
//! same name gives `Failed`, unknown images give `ImageMissing` (when an
//! image list is set), and `set_available(false)` makes every call return
//! `Unavailable` as if the engine had gone away. Nothing runs: `exec` only
//! echoes.

use super::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

mod disk;
mod image;
pub use image::SIM_SNAPSHOT_BYTES;

#[derive(Clone, Default)]
pub struct SimulatedExecutor {
    inner: Arc<Mutex<State>>,
    start_check: Arc<Mutex<Option<StartCheck>>>,
}

/// Called before every (re)start with the machine and the GPU UUIDs its
/// container is pinned to; tests assert there that the machine holds them.
pub type StartCheck =
    Arc<dyn Fn(i64, Vec<String>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

impl std::fmt::Debug for SimulatedExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimulatedExecutor").finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    unavailable: bool,
    /// `None`: every image is present. `Some(list)`: only these.
    images: Option<HashSet<String>>,
    containers: HashMap<String, SimContainer>,
    /// Volume name → (info, installation).
    volumes: HashMap<String, (VolumeInfo, String)>,
    /// One-shot failures injected by tests: operation name → error.
    faults: HashMap<&'static str, ExecError>,
    /// Committed snapshot images: reference → size in bytes.
    committed: HashMap<String, i64>,
    /// Bytes a container wrote outside its volumes (`disk.rs`).
    root_disk: HashMap<String, i64>,
    /// The node's (free, total) disk bytes; `None`: unknown.
    disk_space: Option<(i64, i64)>,
}

#[derive(Debug, Clone)]
struct SimContainer {
    name: String,
    instance: String,
    machine_id: i64,
    status: ContainerStatus,
    started_at: Option<String>,
    gpu_uuids: Vec<String>,
    image: String,
    mounts: Vec<ReadOnlyMount>,
}

/// What a test sees of a simulated container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimContainerView {
    pub id: String,
    pub machine_id: i64,
    pub status: ContainerStatus,
    pub gpu_uuids: Vec<String>,
    /// Read-only binds it was created with (dataset versions).
    pub mounts: Vec<ReadOnlyMount>,
}

/// Monotonic "start time", so every (re)start gets a distinct `started_at`
/// just like Docker's nanosecond timestamps.
static CLOCK: AtomicU64 = AtomicU64::new(0);

fn next_start() -> String {
    let secs = crate::now();
    format!("{secs}.{:09}", CLOCK.fetch_add(1, Ordering::Relaxed))
}

impl SimulatedExecutor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulates the engine going away (`false`) and coming back (`true`).
    pub fn set_available(&self, available: bool) {
        self.lock().unavailable = !available;
    }

    /// Restricts the images considered present; by default all are.
    pub fn set_images(&self, images: Option<Vec<String>>) {
        self.lock().images = images.map(|v| v.into_iter().collect());
    }

    /// Simulates the container's main process exiting by itself.
    pub fn simulate_exit(&self, id: &str, code: i64) -> Result<(), ExecError> {
        let mut s = self.state()?;
        let c = s.containers.get_mut(id).ok_or_else(|| not_found(id))?;
        c.status = ContainerStatus::Exited { code };
        Ok(())
    }

    /// The container as a commit leaves it for a moment (paused).
    pub fn simulate_pause(&self, id: &str) -> Result<(), ExecError> {
        let mut s = self.state()?;
        let c = s.containers.get_mut(id).ok_or_else(|| not_found(id))?;
        c.status = ContainerStatus::Paused;
        Ok(())
    }

    pub fn volume_names(&self) -> Vec<String> {
        self.lock().volumes.keys().cloned().collect()
    }

    pub fn containers(&self) -> Vec<SimContainerView> {
        let s = self.lock();
        s.containers
            .iter()
            .map(|(id, c)| SimContainerView {
                id: id.clone(),
                machine_id: c.machine_id,
                status: c.status,
                gpu_uuids: c.gpu_uuids.clone(),
                mounts: c.mounts.clone(),
            })
            .collect()
    }

    pub fn on_start(&self, check: StartCheck) {
        *self.start_check.lock().unwrap_or_else(|p| p.into_inner()) = Some(check);
    }

    /// Runs the start check (if any) for container `id`.
    async fn check_start(&self, id: &str) {
        let check = self.start_check.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let pinned = self.lock().containers.get(id).map(|c| (c.machine_id, c.gpu_uuids.clone()));
        if let (Some(check), Some((machine_id, uuids))) = (check, pinned) {
            check(machine_id, uuids).await;
        }
    }

    /// Makes the next call of `op` ("create_container", "start_container",
    /// "remove_container", …) fail with `error`, once.
    pub fn fail_next(&self, op: &'static str, error: ExecError) {
        self.lock().faults.insert(op, error);
    }

    /// The lock for operation `op`: an injected fault or `Unavailable`
    /// answers instead.
    fn op(&self, op: &'static str) -> Result<std::sync::MutexGuard<'_, State>, ExecError> {
        let mut s = self.state()?;
        match s.faults.remove(op) {
            Some(e) => Err(e),
            None => Ok(s),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State half-updated in
        // a way that matters for a simulation; keep going.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lock, or `Unavailable` when the simulated engine is "down".
    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>, ExecError> {
        let s = self.lock();
        if s.unavailable {
            return Err(ExecError::Unavailable("simulated Docker Engine is unreachable (set_available(false))".into()));
        }
        Ok(s)
    }

    pub async fn ping(&self) -> Result<EngineInfo, ExecError> {
        drop(self.state()?);
        Ok(EngineInfo { version: "simulated".into(), api_version: "1.41".into(), has_nvidia_runtime: false })
    }

    pub async fn ensure_volume(&self, spec: &MachineSpec) -> Result<VolumeInfo, ExecError> {
        let mut s = self.op("ensure_volume")?;
        let info = VolumeInfo { name: spec.volume_name.clone(), size_enforced: false, mountpoint: None };
        Ok(s.volumes.entry(spec.volume_name.clone()).or_insert((info, spec.instance.clone())).0.clone())
    }

    pub async fn remove_volume(&self, name: &str) -> Result<(), ExecError> {
        self.op("remove_volume")?.volumes.remove(name);
        Ok(())
    }

    pub async fn create_container(&self, spec: &MachineSpec) -> Result<ContainerInfo, ExecError> {
        let mut s = self.op("create_container")?;
        if s.images.as_ref().is_some_and(|i| !i.contains(&spec.image)) {
            return Err(ExecError::ImageMissing(format!(
                "image {} is not present on node simulated; build or load it first (Gantry never pulls)",
                spec.image
            )));
        }
        let name = spec.container_name();
        if s.containers.values().any(|c| c.name == name) {
            return Err(ExecError::Failed(format!("container {name} already exists")));
        }
        let id = format!("sim{:016x}", CLOCK.fetch_add(1, Ordering::Relaxed));
        let c = SimContainer {
            name,
            instance: spec.instance.clone(),
            machine_id: spec.machine_id,
            status: ContainerStatus::Created,
            started_at: None,
            gpu_uuids: spec.gpu_uuids.clone(),
            image: spec.image.clone(),
            mounts: spec.mounts.clone(),
        };
        s.containers.insert(id.clone(), c);
        Ok(ContainerInfo { id })
    }

    pub async fn start_container(&self, id: &str) -> Result<(), ExecError> {
        self.check_start(id).await;
        let mut s = self.op("start_container")?;
        let c = s.containers.get_mut(id).ok_or_else(|| not_found(id))?;
        if c.status != ContainerStatus::Running {
            c.status = ContainerStatus::Running;
            c.started_at = Some(next_start());
        }
        Ok(())
    }

    pub async fn restart_container(&self, id: &str) -> Result<(), ExecError> {
        self.check_start(id).await;
        let mut s = self.op("restart_container")?;
        let c = s.containers.get_mut(id).ok_or_else(|| not_found(id))?;
        c.status = ContainerStatus::Running;
        c.started_at = Some(next_start());
        Ok(())
    }

    pub async fn stop_container(&self, id: &str) -> Result<(), ExecError> {
        let mut s = self.op("stop_container")?;
        let c = s.containers.get_mut(id).ok_or_else(|| not_found(id))?;
        if c.status == ContainerStatus::Running {
            // The demo image exits 0 on SIGTERM; mirror that.
            c.status = ContainerStatus::Exited { code: 0 };
        }
        Ok(())
    }

    pub async fn remove_container(&self, id: &str) -> Result<(), ExecError> {
        self.op("remove_container")?.containers.remove(id);
        Ok(())
    }

    pub async fn inspect_container(&self, id: &str) -> Result<ContainerState, ExecError> {
        let s = self.op("inspect_container")?;
        Ok(match s.containers.get(id) {
            // Like Docker with restart policy "no": RestartCount stays 0.
            Some(c) => ContainerState { status: c.status, restart_count: 0, started_at: c.started_at.clone() },
            None => ContainerState::missing(),
        })
    }

    pub async fn list_managed(&self, instance: &str) -> Result<Vec<ManagedContainer>, ExecError> {
        let s = self.op("list_managed")?;
        Ok(s.containers
            .iter()
            .filter(|(_, c)| c.instance == instance)
            .map(|(id, c)| ManagedContainer {
                id: id.clone(),
                machine_id: Some(c.machine_id),
                name: c.name.clone(),
                status: c.status,
            })
            .collect())
    }

    /// Nothing runs, so there is no output.
    pub async fn output_tail(&self, id: &str, _lines: usize) -> Result<String, ExecError> {
        let s = self.state()?;
        s.containers.get(id).map(|_| String::new()).ok_or_else(|| not_found(id))
    }

    pub async fn list_managed_volumes(&self, instance: &str) -> Result<Vec<String>, ExecError> {
        let s = self.state()?;
        Ok(s.volumes.iter().filter(|(_, (_, i))| i == instance).map(|(n, _)| n.clone()).collect())
    }

    /// `echo ARGS…` prints them; anything else succeeds silently.
    pub async fn exec(&self, id: &str, cmd: &[&str]) -> Result<(i64, String), ExecError> {
        let s = self.state()?;
        let c = s.containers.get(id).ok_or_else(|| not_found(id))?;
        if c.status != ContainerStatus::Running {
            return Err(ExecError::Failed(format!("exec in container {id} failed: container is not running")));
        }
        match cmd.split_first() {
            Some((&"echo", args)) => Ok((0, format!("{}\n", args.join(" ")))),
            _ => Ok((0, String::new())),
        }
    }
}

fn not_found(id: &str) -> ExecError {
    ExecError::NotFound(format!("no such container: {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(machine_id: i64) -> MachineSpec {
        MachineSpec {
            instance: "test".into(),
            machine_id,
            task_id: 1,
            name: format!("m{machine_id}"),
            owner: "alice".into(),
            group: "ml".into(),
            image: "gantry/devbox:latest".into(),
            gpu_uuids: vec!["GPU-1".into()],
            gpu_indexes: vec![0],
            volume_name: format!("gantry-v{machine_id}"),
            volume_size_gb: 1,
            limits: Limits::default(),
            command: None,
            mounts: Vec::new(),
        }
    }

    fn exec() -> Executor {
        Executor::Simulated(SimulatedExecutor::new())
    }

    gantry_testkit::timed_test! {
        async fn lifecycle_follows_docker_state_machine() {
            let ex = exec();
            assert_eq!(ex.kind(), "simulated");
            let s = spec(1);
            ex.ensure_volume(&s).await.unwrap();
            ex.ensure_volume(&s).await.unwrap(); // idempotent
            let c = ex.create_container(&s).await.unwrap();
            assert_eq!(ex.inspect_container(&c.id).await.unwrap().status, ContainerStatus::Created);
            ex.start_container(&c.id).await.unwrap();
            let first = ex.inspect_container(&c.id).await.unwrap();
            assert_eq!(first.status, ContainerStatus::Running);
            ex.restart_container(&c.id).await.unwrap();
            let second = ex.inspect_container(&c.id).await.unwrap();
            assert_eq!(second.status, ContainerStatus::Running);
            assert_ne!(first.started_at, second.started_at, "restart must change started_at");
            assert_eq!(ex.exec(&c.id, &["echo", "hi"]).await.unwrap(), (0, "hi\n".into()));
            ex.stop_container(&c.id).await.unwrap();
            assert_eq!(ex.inspect_container(&c.id).await.unwrap().status, ContainerStatus::Exited { code: 0 });
            assert!(matches!(ex.exec(&c.id, &["true"]).await, Err(ExecError::Failed(_))));
            let listed = ex.list_managed("test").await.unwrap();
            assert_eq!(listed.len(), 1);
            assert_eq!((listed[0].machine_id, listed[0].name.as_str()), (Some(1), "gantry-test-m1"));
            assert!(ex.list_managed("another-installation").await.unwrap().is_empty(), "other installations see nothing");
            ex.remove_container(&c.id).await.unwrap();
            ex.remove_container(&c.id).await.unwrap(); // idempotent
            ex.remove_volume(&s.volume_name).await.unwrap();
            ex.remove_volume(&s.volume_name).await.unwrap();
            assert_eq!(ex.inspect_container(&c.id).await.unwrap().status, ContainerStatus::Missing);
            assert!(ex.list_managed("test").await.unwrap().is_empty());
        }
    }

    gantry_testkit::timed_test! {
        async fn errors_match_docker() {
            let sim = SimulatedExecutor::new();
            let ex = Executor::from(sim.clone());
            let c = ex.create_container(&spec(2)).await.unwrap();
            let dup = ex.create_container(&spec(2)).await.unwrap_err();
            assert!(matches!(dup, ExecError::Failed(ref m) if m.contains("gantry-test-m2")), "{dup}");
            assert!(matches!(ex.start_container("nope").await, Err(ExecError::NotFound(_))));
            assert!(matches!(ex.exec("nope", &["true"]).await, Err(ExecError::NotFound(_))));
            sim.set_images(Some(vec!["gantry/devbox:latest".into()]));
            let mut other = spec(3);
            other.image = "gantry/devbox:nope".into();
            assert!(
                matches!(ex.create_container(&other).await, Err(ExecError::ImageMissing(m)) if m.contains("gantry/devbox:nope"))
            );
            ex.start_container(&c.id).await.unwrap();
            sim.simulate_exit(&c.id, 3).unwrap();
            assert_eq!(ex.inspect_container(&c.id).await.unwrap().status, ContainerStatus::Exited { code: 3 });
        }
    }

    gantry_testkit::timed_test! {
        async fn unavailable_engine() {
            let sim = SimulatedExecutor::new();
            let ex = Executor::from(sim.clone());
            sim.set_available(false);
            let err = ex.ping().await.unwrap_err();
            assert!(err.is_retryable(), "{err}");
            assert!(matches!(ex.ensure_volume(&spec(4)).await, Err(ExecError::Unavailable(_))));
            assert!(matches!(ex.inspect_container("x").await, Err(ExecError::Unavailable(_))));
            sim.set_available(true);
            assert!(ex.ping().await.is_ok());
        }
    }
}
