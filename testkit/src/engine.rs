//! A temporary Gantry installation for the platform's tests: the database
//! ([`crate::install`]), a group, users, one node (simulated or the local
//! Docker Engine), the demo image, the admission worker and a dispatcher
//! driven step by step.

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, User},
    cluster::{self, NodeRegistration},
    db,
    dispatch::{self, Dispatcher},
    executor::Executor,
    fleet::Fleet,
    gpus::{self, SimulatedGpus},
    images,
    machines::{Admissions, CreateMachine},
};
use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering},
    Arc,
};
use tokio::sync::Notify;

pub use crate::install::register_simulated;

pub const IMAGE: &str = "gantry/devbox:latest";

pub struct Env {
    /// A share of the host's loop devices (see [`loop_devices`]).
    pub _loop_devices: Option<LoopDevices>,
    pub dir: tempfile::TempDir,
    pub pool: db::Pool,
    pub admissions: Admissions,
    pub dispatcher: Dispatcher,
    pub node_id: i64,
}

/// Loop devices are one pool for the whole host, and the tests of this
/// binary run in parallel: a test that frees a device and expects it back
/// (`volume_reboot`) takes them alone; every Docker environment, which may
/// attach some, takes a share.
pub fn loop_devices() -> &'static tokio::sync::RwLock<()> {
    static DEVICES: std::sync::OnceLock<tokio::sync::RwLock<()>> = std::sync::OnceLock::new();
    DEVICES.get_or_init(|| tokio::sync::RwLock::new(()))
}

/// A share of the loop devices, or all of them.
pub enum LoopDevices {
    Shared(tokio::sync::RwLockReadGuard<'static, ()>),
    Alone(tokio::sync::RwLockWriteGuard<'static, ()>),
}

/// `executor`: "docker" (the real local engine) or "simulated".
pub async fn env(executor: &str, gpus_on_node: u32, quota: i64) -> Env {
    let devices = if executor == "docker" { Some(LoopDevices::Shared(loop_devices().read().await)) } else { None };
    env_holding(executor, gpus_on_node, quota, devices).await
}

/// A Docker environment that has the host's loop devices to itself.
pub async fn docker_env_alone(gpus_on_node: u32, quota: i64) -> Env {
    let devices = LoopDevices::Alone(loop_devices().write().await);
    env_holding("docker", gpus_on_node, quota, Some(devices)).await
}

async fn env_holding(executor: &str, gpus_on_node: u32, quota: i64, devices: Option<LoopDevices>) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let pool = crate::install::database(dir.path()).await;
    let sim = SimulatedGpus { count: gpus_on_node, model: "SIM-A100".into(), memory_mb: 81920 };
    let node_name = format!("node-{}", rand::random::<u32>());
    let gpus = gpus::simulated(&node_name, &sim);
    let (endpoint, volume_dir) = match executor {
        "docker" => {
            ("unix:///var/run/docker.sock".to_string(), dir.path().join("volumes").to_string_lossy().into_owned())
        }
        _ => (format!("simulated://{node_name}"), String::new()),
    };
    let node_id = cluster::register_node(
        &pool,
        NodeRegistration {
            name: &node_name,
            region_code: "local",
            docker_endpoint: &endpoint,
            volume_dir: &volume_dir,
            executor,
            cpu_count: 2,
            memory_mb: 1024,
            gpus: &gpus,
        },
    )
    .await
    .unwrap();
    images::ensure_default_image(&pool, "devbox", IMAGE, "demo").await.unwrap();
    accounts::create_group(&pool, None, "ml-team", quota).await.unwrap();
    let wake = Arc::new(Notify::new());
    let admissions = Admissions::start(pool.clone(), wake.clone());
    let dispatcher = Dispatcher::new(pool.clone(), Fleet::new(), wake, 8);
    Env { _loop_devices: devices, dir, pool, admissions, dispatcher, node_id }
}

/// An installation whose node is the real local Docker Engine; fails with
/// what to run when the engine does not answer.
pub async fn docker_env(gpus_on_node: u32, quota: i64) -> Env {
    let env = env("docker", gpus_on_node, quota).await;
    if let Err(e) = env.executor().await.ping().await {
        panic!(
            "{e}\nThe Docker Engine is not answering: run `bash scripts/dockerd.sh` and `bash scripts/demo-image.sh`."
        );
    }
    env
}

impl Env {
    /// The executor the dispatcher uses for the test's node.
    pub async fn executor(&self) -> Executor {
        self.dispatcher.fleet.executor(&self.pool, self.node_id).await.unwrap()
    }

    pub async fn user(&self, name: &str, group: &str) -> User {
        crate::install::user(&self.pool, name, "password-123", Role::User, Some(group)).await
    }

    pub fn use_executor(&self, executor: Executor) {
        self.dispatcher.fleet.insert(self.node_id, executor);
    }

    pub fn create(&self, user: &User, name: &str, gpus: u32) -> CreateMachine {
        CreateMachine::new(user.clone(), name, gpus, 1)
    }

    /// Runs every due task to its end, in order, without the background
    /// loop: deterministic and with nothing to wait for.
    pub async fn drive(&self) -> usize {
        let mut ran = 0;
        loop {
            let claimed = dispatch::claim(&self.pool, &self.dispatcher.owner, 16).await.unwrap();
            if claimed.is_empty() {
                return ran;
            }
            for task in claimed {
                self.dispatcher.execute(task).await;
                ran += 1;
            }
        }
    }

    pub async fn scalar(&self, sql: &str) -> i64 {
        crate::install::count(&self.pool, sql).await
    }

    /// Runs the due tasks in a process that dies at its `at`-th step
    /// boundary (counting from 0 over all tasks); `true` if it died. Its
    /// tasks stay `running` under its lease, as after a real crash.
    pub async fn drive_dying_at(&self, at: usize) -> bool {
        let seen = Arc::new(AtomicUsize::new(0));
        let died = Arc::new(AtomicBool::new(false));
        let mut dying = self.dispatcher.clone();
        dying.owner = dispatch::new_owner_id();
        let (seen2, died2) = (seen.clone(), died.clone());
        dying.hook = Some(Arc::new(move |_, _| {
            let hit = died2.load(Ordering::SeqCst) || seen2.fetch_add(1, Ordering::SeqCst) == at;
            died2.store(hit, Ordering::SeqCst);
            hit
        }));
        for task in dispatch::claim(&self.pool, &dying.owner, 16).await.unwrap() {
            dying.execute(task).await;
        }
        died.load(Ordering::SeqCst)
    }

    /// Drives as a process that dies at the checkpoint named `step` (and
    /// leaves every task it claimed there or later as a crash would).
    pub async fn drive_dying_at_step(&self, step: &'static str) -> bool {
        let died = Arc::new(AtomicBool::new(false));
        let mut dying = self.dispatcher.clone();
        dying.owner = dispatch::new_owner_id();
        let died2 = died.clone();
        dying.hook = Some(Arc::new(move |_, at| {
            let hit = died2.load(Ordering::SeqCst) || at == step;
            died2.store(hit, Ordering::SeqCst);
            hit
        }));
        for task in dispatch::claim(&self.pool, &dying.owner, 16).await.unwrap() {
            dying.execute(task).await;
        }
        died.load(Ordering::SeqCst)
    }

    /// What a restarted process does first: every running task's lease is
    /// treated as expired, so it is resumed.
    pub async fn expire_all_leases(&self) -> u64 {
        dispatch::expire_leases(&self.pool, i64::MAX).await.unwrap()
    }

    /// The quota invariant: every group's `gpus_in_use` equals the GPUs its
    /// machines hold, and machines that must hold nothing hold nothing.
    pub async fn assert_quota_consistent(&self) {
        let drift: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT g.name, g.gpus_in_use, (SELECT COUNT(*) FROM machine_gpus mg JOIN machines m ON m.id = mg.machine_id WHERE m.group_id = g.id)
             FROM groups g",
        )
        .fetch_all(&self.pool)
        .await
        .unwrap();
        for (group, in_use, held) in drift {
            assert_eq!(in_use, held, "group {group}: gpus_in_use {in_use} but its machines hold {held}");
        }
        let wrong = self.scalar("SELECT COUNT(*) FROM machine_gpus mg JOIN machines m ON m.id = mg.machine_id WHERE m.state IN ('deleted', 'lost')").await;
        assert_eq!(wrong, 0, "deleted or lost machines hold GPUs");
    }

    pub async fn text(&self, sql: &str) -> String {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
    }
}

/// Region `local` (the env's node) runs PyTorch 2.4 / Python 3.11, from the
/// demo image; returns the master image's id.
pub async fn torch_catalogue(env: &Env, admin: &User) -> i64 {
    use gantry_platform::catalogue::{self, NewMasterImage};
    let image = catalogue::create_region_image(&env.pool, admin.id, "local", IMAGE, "amd64", "training").await.unwrap();
    let master = NewMasterImage {
        name: "torch",
        interpreter: "Python",
        interpreter_version: "3.11",
        framework: "PyTorch",
        framework_version: "2.4",
    };
    let master = catalogue::create_master_image(&env.pool, admin.id, &master).await.unwrap();
    catalogue::set_link(&env.pool, admin.id, master, image.id, true).await.unwrap();
    master
}

/// A one-GPU PyTorch 2.4 job that `torch_catalogue` matches.
pub fn compute_job(name: &str, command: gantry_platform::compute::Command) -> gantry_platform::compute::SubmitCompute {
    gantry_platform::compute::SubmitCompute {
        name: name.into(),
        framework: "PyTorch".into(),
        framework_version: "2.4".into(),
        interpreter: "Python".into(),
        interpreter_version: "3.11".into(),
        command,
        gpu_count: 1,
        gpu_model: None,
        cpu_millis: 500,
        memory_mb: 256,
        time_limit_secs: 600,
        datasets: Vec::new(),
    }
}
