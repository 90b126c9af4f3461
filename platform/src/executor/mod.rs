//! The executor layer: the one place that turns "run this dev machine" into
//! containers and volumes on a worker node's container engine.
//!
//! Two back ends behind one enum (enum dispatch keeps the async methods
//! object-safe-free and cheap to clone; both variants hold `Arc`s):
//! - [`DockerExecutor`]: a real Docker Engine via bollard (PRODUCT A3).
//! - [`SimulatedExecutor`]: in-memory, for machines without Docker, the
//!   benchmark, and tests of the dispatcher logic.
//!
//! The executor is deliberately stateless about *desired* state: restart
//! policy is "no" because Gantry's reconciler, not the engine, decides what
//! should be running.

pub mod docker;
pub mod inside;
pub mod loopdev;
pub mod simulated;

pub use docker::DockerExecutor;
pub use simulated::SimulatedExecutor;

/// Labels put on every container Gantry creates; `list_managed` finds
/// containers by `gantry.machine` so it also sees ones whose DB row is gone.
pub const LABEL_MACHINE: &str = "gantry.machine";
pub const LABEL_TASK: &str = "gantry.task";
pub const LABEL_OWNER: &str = "gantry.owner";
pub const LABEL_GROUP: &str = "gantry.group";
pub const LABEL_MANAGED: &str = "gantry.managed";
/// Which Gantry installation owns it: several installations (and test
/// runs) can share one engine without touching each other's containers.
pub const LABEL_INSTANCE: &str = "gantry.instance";
/// Where the machine's data volume is mounted inside the container.
pub const DATA_MOUNT: &str = "/data";

/// Everything needed to create one dev machine's container and volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSpec {
    /// The owning installation's id (see `LABEL_INSTANCE`).
    pub instance: String,
    pub machine_id: i64,
    pub task_id: i64,
    /// Machine name; also the container's hostname.
    pub name: String,
    pub owner: String,
    pub group: String,
    /// Image reference; must already be present on the node (never pulled).
    pub image: String,
    pub gpu_uuids: Vec<String>,
    pub gpu_indexes: Vec<u32>,
    pub volume_name: String,
    pub volume_size_gb: i64,
    pub limits: Limits,
    /// A compute task's argv; `None`: the image's own command.
    pub command: Option<Vec<String>>,
    /// Host directories bound read-only (sealed dataset versions).
    pub mounts: Vec<ReadOnlyMount>,
}

/// A host directory bound into the container read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnlyMount {
    /// Absolute path on the node.
    pub source: String,
    /// Absolute path inside the container.
    pub target: String,
}

/// Resource limits of a machine's container, applied by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Thousandths of a CPU (Docker's NanoCPUs / 1e6).
    pub cpu_millis: i64,
    pub memory_mb: i64,
    pub pids: i64,
    /// Its writable layer (files outside its volumes), in MB; 0: no limit.
    /// Given to the engine where its storage driver enforces a size;
    /// elsewhere the disk watcher (`crate::disk`) stops a machine over it.
    pub root_disk_mb: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { cpu_millis: 2000, memory_mb: 4096, pids: 4096, root_disk_mb: 0 }
    }
}

impl MachineSpec {
    /// The container name. Fixed per machine so a stale container from an
    /// interrupted reinstall collides (409) instead of silently doubling up.
    pub fn container_name(&self) -> String {
        container_name(&self.instance, self.machine_id)
    }
}

pub fn container_name(instance: &str, machine_id: i64) -> String {
    format!("gantry-{instance}-m{machine_id}")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    pub id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerStatus {
    Running,
    Exited {
        code: i64,
    },
    Restarting,
    Paused,
    Created,
    /// No such container on the engine.
    Missing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    pub status: ContainerStatus,
    /// Docker's `RestartCount`: restarts done by a *restart policy* only.
    /// Gantry uses policy "no", so this stays 0 even after explicit
    /// `restart_container` calls; it is kept for diagnostics.
    pub restart_count: i64,
    /// Docker's `State.StartedAt` (RFC 3339), changes on every (re)start.
    /// Callers detect "it was restarted" by comparing this value; `None`
    /// when the container is missing or never started.
    pub started_at: Option<String>,
}

impl ContainerState {
    pub fn missing() -> Self {
        ContainerState { status: ContainerStatus::Missing, restart_count: 0, started_at: None }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedContainer {
    pub id: String,
    /// Parsed `gantry.machine` label; `None` if the label is not a number.
    pub machine_id: Option<i64>,
    pub name: String,
    pub status: ContainerStatus,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    pub version: String,
    pub api_version: String,
    /// The engine has an `nvidia` runtime, so GPU device requests work.
    pub has_nvidia_runtime: bool,
}

/// An image on a node's engine (a committed snapshot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub size_bytes: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInfo {
    pub name: String,
    /// True when the volume is a loop-mounted ext4 image of the requested
    /// size; false for a plain named volume (size is only advisory).
    pub size_enforced: bool,
    pub mountpoint: Option<String>,
}

/// Executor failures. `Unavailable` is the only retryable one: the engine
/// could not be reached at all, so nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    ImageMissing(String),
    #[error("{0}")]
    Failed(String),
}

impl ExecError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, ExecError::Unavailable(_))
    }
}

/// The executor a node is driven through. Cloning is cheap (shared state).
#[derive(Debug, Clone)]
pub enum Executor {
    Docker(DockerExecutor),
    Simulated(SimulatedExecutor),
}

/// Forwards one call to whichever back end is inside.
macro_rules! dispatch {
    ($self:ident, $e:ident => $call:expr) => {
        match $self {
            Executor::Docker($e) => $call.await,
            Executor::Simulated($e) => $call.await,
        }
    };
}

impl Executor {
    /// Whether this node's machines are simulated (no Docker Engine).
    pub fn is_simulated(&self) -> bool {
        matches!(self, Executor::Simulated(_))
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Executor::Docker(_) => "docker",
            Executor::Simulated(_) => "simulated",
        }
    }

    pub async fn ping(&self) -> Result<EngineInfo, ExecError> {
        dispatch!(self, e => e.ping())
    }

    /// Creates the machine's data volume; an existing one is reused as is.
    pub async fn ensure_volume(&self, spec: &MachineSpec) -> Result<VolumeInfo, ExecError> {
        dispatch!(self, e => e.ensure_volume(spec))
    }

    /// Creates (does not start) the container; never pulls the image.
    pub async fn create_container(&self, spec: &MachineSpec) -> Result<ContainerInfo, ExecError> {
        dispatch!(self, e => e.create_container(spec))
    }

    /// Starting a running container is a no-op.
    pub async fn start_container(&self, id: &str) -> Result<(), ExecError> {
        dispatch!(self, e => e.start_container(id))
    }

    pub async fn restart_container(&self, id: &str) -> Result<(), ExecError> {
        dispatch!(self, e => e.restart_container(id))
    }

    /// Stopping a stopped container is a no-op.
    pub async fn stop_container(&self, id: &str) -> Result<(), ExecError> {
        dispatch!(self, e => e.stop_container(id))
    }

    /// Stops (with a grace period), then removes; a missing container
    /// counts as removed.
    pub async fn remove_container(&self, id: &str) -> Result<(), ExecError> {
        dispatch!(self, e => e.remove_container(id))
    }

    /// Removes the volume (and its loop device/image); missing is Ok.
    pub async fn remove_volume(&self, name: &str) -> Result<(), ExecError> {
        dispatch!(self, e => e.remove_volume(name))
    }

    /// A missing container is reported as `ContainerStatus::Missing`.
    pub async fn inspect_container(&self, id: &str) -> Result<ContainerState, ExecError> {
        dispatch!(self, e => e.inspect_container(id))
    }

    /// All containers (running or not) carrying the `gantry.machine` label.
    /// Containers of installation `instance` (running or not).
    pub async fn list_managed(&self, instance: &str) -> Result<Vec<ManagedContainer>, ExecError> {
        dispatch!(self, e => e.list_managed(instance))
    }

    /// The container's writable layer in bytes; `None`: no such container.
    pub async fn root_disk_bytes(&self, id: &str) -> Result<Option<i64>, ExecError> {
        dispatch!(self, e => e.root_disk_bytes(id))
    }

    /// Free and total bytes where the engine keeps its data; `None` when
    /// nothing here can measure it (a remote engine).
    pub async fn disk_space(&self) -> Result<Option<(i64, i64)>, ExecError> {
        dispatch!(self, e => e.disk_space())
    }

    /// The last `lines` lines of the container's stdout and stderr.
    pub async fn output_tail(&self, id: &str, lines: usize) -> Result<String, ExecError> {
        dispatch!(self, e => e.output_tail(id, lines))
    }

    /// Names of the data volumes of installation `instance` on this engine.
    pub async fn list_managed_volumes(&self, instance: &str) -> Result<Vec<String>, ExecError> {
        dispatch!(self, e => e.list_managed_volumes(instance))
    }

    /// Names of the volumes whose block images (`<volume_dir>/<name>.img`,
    /// named as installation `instance` names them) are at least `min_age`
    /// old on this node; none without block volumes.
    pub fn list_volume_images(&self, instance: &str, min_age: std::time::Duration) -> Vec<String> {
        match self {
            Executor::Docker(e) => e.list_volume_images(instance, min_age),
            Executor::Simulated(_) => Vec::new(),
        }
    }

    /// Detaches and deletes volume `name`'s block image if no Docker volume
    /// of that name exists: `Some(loop devices detached)`, or `None` when a
    /// Docker volume uses it (nothing touched).
    pub async fn remove_orphan_image(&self, name: &str) -> Result<Option<Vec<String>>, ExecError> {
        match self {
            Executor::Docker(e) => e.remove_orphan_image(name).await,
            Executor::Simulated(_) => Ok(None),
        }
    }

    /// Runs `cmd` in the running container; returns exit code and
    /// stdout+stderr interleaved as produced.
    pub async fn exec(&self, id: &str, cmd: &[&str]) -> Result<(i64, String), ExecError> {
        dispatch!(self, e => e.exec(id, cmd))
    }
}

impl Executor {
    /// Commits the container (running or stopped; paused meanwhile) to the
    /// image `reference` (`repo:tag`). The data volume is not included.
    pub async fn commit_container(&self, id: &str, reference: &str) -> Result<ImageInfo, ExecError> {
        dispatch!(self, e => e.commit_container(id, reference))
    }

    /// The image, or `None` when the engine does not have it.
    pub async fn image_info(&self, reference: &str) -> Result<Option<ImageInfo>, ExecError> {
        dispatch!(self, e => e.image_info(reference))
    }

    /// Removes the image; missing is Ok, one a container still uses is refused.
    pub async fn remove_image(&self, reference: &str) -> Result<(), ExecError> {
        dispatch!(self, e => e.remove_image(reference))
    }
}

impl From<DockerExecutor> for Executor {
    fn from(e: DockerExecutor) -> Self {
        Executor::Docker(e)
    }
}

impl From<SimulatedExecutor> for Executor {
    fn from(e: SimulatedExecutor) -> Self {
        Executor::Simulated(e)
    }
}
