//! `gantry serve` starting while the local Docker Engine does not answer
//! yet (the host just rebooted and dockerd is still starting). A node that
//! has run Docker stays a Docker node: its running machines are not taken
//! for vanished, nothing is scheduled onto it, and its calls wait for the
//! engine. Only a node that never had Docker falls back to simulated.

use clap::Parser;
use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser},
    cluster::{self, NodeRegistration},
    db,
    dispatch::{self, Dispatcher},
    executor::SimulatedExecutor,
    fleet::Fleet,
    gpus::{self, SimulatedGpus},
    images,
    machines::{Admissions, CreateMachine},
    nodes, reconcile,
};
use gantry_server::{
    config::{Cli, Command, NodeArgs},
    services,
};
use std::sync::Arc;
use tokio::sync::Notify;

/// Nothing listens here: a ping fails at once, as with a stopped engine.
const NO_ENGINE: &str = "unix:///tmp/gantry-no-engine.sock";
const NODE: &str = "local";
/// A heartbeat from long before the reboot.
const OLD_HEARTBEAT: i64 = 1_000;

fn node_args(executor: &str) -> NodeArgs {
    let argv = [
        "gantry",
        "serve",
        "--executor",
        executor,
        "--docker-endpoint",
        NO_ENGINE,
        "--node-name",
        NODE,
        "--sim-gpus",
        "2",
    ];
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Serve(args) => args.node,
        _ => unreachable!("parsed `serve`"),
    }
}

async fn pool(dir: &tempfile::TempDir) -> db::Pool {
    gantry_testkit::install::database(dir.path()).await
}

/// The node as the previous run left it: a Docker node with one running
/// machine. A simulated executor stands in for the engine that ran it.
async fn docker_node_with_a_running_machine(pool: &db::Pool) -> (i64, i64) {
    let sim = SimulatedGpus { count: 2, model: "SIM-A100-80GB".into(), memory_mb: 81_920 };
    let found = gpus::simulated(NODE, &sim);
    let reg = NodeRegistration {
        name: NODE,
        region_code: "local",
        docker_endpoint: NO_ENGINE,
        volume_dir: "",
        executor: "docker",
        cpu_count: 2,
        memory_mb: 1024,
        gpus: &found,
    };
    let node_id = cluster::register_node(pool, reg).await.unwrap();
    images::ensure_default_image(pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
    accounts::create_group(pool, None, "ml-team", 2).await.unwrap();
    let alice = accounts::create_user(
        pool,
        None,
        NewUser { username: "alice", password: "password-123", role: Role::User, group: Some("ml-team") },
    )
    .await
    .unwrap();
    let wake = Arc::new(Notify::new());
    let admitted =
        Admissions::start(pool.clone(), wake.clone()).create(CreateMachine::new(alice, "train", 1, 1)).await.unwrap();
    let fleet = Fleet::new();
    fleet.insert(node_id, SimulatedExecutor::new().into());
    let dispatcher = Dispatcher::new(pool.clone(), fleet, wake, 4);
    for task in dispatch::claim(pool, &dispatcher.owner, 16).await.unwrap() {
        dispatcher.execute(task).await;
    }
    assert_eq!(machine_state(pool, admitted.machine_id).await, "running", "set-up: the machine runs before the reboot");
    sqlx::query("UPDATE nodes SET last_heartbeat = ?").bind(OLD_HEARTBEAT).execute(pool).await.unwrap();
    (node_id, admitted.machine_id)
}

async fn machine_state(pool: &db::Pool, id: i64) -> String {
    sqlx::query_scalar("SELECT state FROM machines WHERE id = ?").bind(id).fetch_one(pool).await.unwrap()
}

async fn node_row(pool: &db::Pool, id: i64) -> (String, String, i64) {
    sqlx::query_as("SELECT executor, docker_endpoint, last_heartbeat FROM nodes WHERE id = ?")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    async fn a_docker_node_stays_docker_when_its_engine_is_not_up_yet() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir).await;
        let (node_id, machine) = docker_node_with_a_running_machine(&pool).await;

        // The restart, with `--executor auto` and the engine still down.
        let local = services::register_local_node(&pool, dir.path(), &node_args("auto")).await.unwrap();
        assert_eq!(local.id, node_id);
        let executor = local.executor.expect("a unix socket address always makes an executor");
        assert_eq!(executor.kind(), "docker", "the node keeps the executor its machines run on");
        assert_eq!(node_row(&pool, node_id).await, ("docker".into(), NO_ENGINE.into(), OLD_HEARTBEAT), "row unchanged: still Docker, same endpoint, no fresh heartbeat");

        let fleet = Fleet::new();
        fleet.insert(node_id, executor);
        let report = reconcile::reconcile_once(&pool, &fleet).await.unwrap();
        assert!(report.changes.is_empty(), "nothing is taken for vanished: {:?}", report.changes);
        assert!(report.unreachable.iter().any(|u| u.starts_with(NODE)), "the node is reported unreachable: {report:?}");
        assert_eq!(machine_state(&pool, machine).await, "running");
        let silent = nodes::monitor_once(&pool, &fleet).await.unwrap();
        assert_eq!(silent, vec![NODE.to_string()], "the monitor withholds its heartbeat, so it takes nothing new");
    }
}

gantry_testkit::timed_test! {
    async fn an_explicit_docker_node_stays_docker_when_its_endpoint_is_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir).await;
        let (node_id, machine) = docker_node_with_a_running_machine(&pool).await;

        // An endpoint no executor can be made for must not turn the node
        // simulated either; the fleet keeps saying why it cannot reach it.
        let mut args = node_args("docker");
        args.docker_endpoint = "ftp://nowhere".into();
        let local = services::register_local_node(&pool, dir.path(), &args).await.unwrap();
        assert!(local.executor.is_none(), "no executor to hand to the fleet");
        let (executor, endpoint, _) = node_row(&pool, node_id).await;
        assert_eq!((executor.as_str(), endpoint.as_str()), ("docker", "ftp://nowhere"));

        let fleet = Fleet::new();
        let report = reconcile::reconcile_once(&pool, &fleet).await.unwrap();
        assert!(report.changes.is_empty(), "{:?}", report.changes);
        assert!(report.unreachable.iter().any(|u| u.starts_with(NODE)), "{report:?}");
        assert_eq!(machine_state(&pool, machine).await, "running");
    }
}

gantry_testkit::timed_test! {
    async fn a_node_that_never_had_docker_falls_back_to_simulated() {
        let dir = tempfile::tempdir().unwrap();
        let pool = pool(&dir).await;
        let local = services::register_local_node(&pool, dir.path(), &node_args("auto")).await.unwrap();
        assert_eq!(local.executor.expect("simulated").kind(), "simulated", "first start on a host without Docker");
        let (executor, endpoint, _) = node_row(&pool, local.id).await;
        assert_eq!((executor.as_str(), endpoint.as_str()), ("simulated", "simulated://local"));
    }
}
