//! Compute tasks on real Docker Engines: matched to a region, run to their
//! end as job machines, output and exit code kept, GPUs refunded on exit,
//! failure, time limit and cancel; two regions on two engines (the second
//! `dockerd` of `scripts/dockerd2.sh`).

use gantry_testkit::engine;

use engine::{compute_job, docker_env, torch_catalogue, Env, IMAGE};
use gantry_core::task::TaskKind;
use gantry_platform::{
    accounts::User,
    catalogue::{self, NewMasterImage},
    cluster::{self, NodeRegistration},
    compute::{self, Command},
    gpus::{self, SimulatedGpus},
    machines,
};

/// Runs dispatcher and watcher until the task ends (bounded passes).
async fn run_to_end(env: &Env, user: &User, id: i64) -> compute::ComputeTaskView {
    for _ in 0..200 {
        env.drive().await;
        compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        env.drive().await;
        let t = compute::compute_task(&env.pool, user, id).await.unwrap();
        if t.state.is_terminal() {
            return t;
        }
        // The container runs on its own; let it get on with it.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("compute task #{id} did not finish");
}

async fn leftovers(env: &Env) -> usize {
    let instance = gantry_platform::machines::instance_id(&env.pool).await.unwrap();
    env.executor().await.list_managed(&instance).await.unwrap().len()
}

gantry_testkit::timed_test! {
    async fn a_compute_task_runs_to_its_end_and_gives_its_gpus_back() {
        let env = docker_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        torch_catalogue(&env, &alice).await;

        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("hello", Command::Argv(vec!["echo".into(), "hello".into()]))).await.unwrap();
        assert_eq!((t.state, t.region.as_deref()), (gantry_core::task::TaskState::Scheduled, Some("local")), "{}", t.message);
        let decision: serde_json::Value = serde_json::from_str(t.decision.as_deref().unwrap()).unwrap();
        assert_eq!(decision["image_set"], serde_json::json!(["local"]));
        assert_eq!(decision["intersection"], serde_json::json!(["local"]));
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 1, "the job holds its GPU");
        let done = run_to_end(&env, &alice, t.id).await;
        assert_eq!((done.state, done.exit_code), (gantry_core::task::TaskState::Succeeded, Some(0)), "{}", done.message);
        assert_eq!(done.logs_tail, "hello\n");
        assert!(done.started_at.is_some() && done.finished_at.is_some());
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0, "refunded on exit");
        assert_eq!(leftovers(&env).await, 0);

        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("oops", Command::Shell("echo oops >&2; exit 3".into()))).await.unwrap();
        let done = run_to_end(&env, &alice, t.id).await;
        assert_eq!((done.state, done.exit_code, done.logs_tail.as_str()), (gantry_core::task::TaskState::Failed, Some(3), "oops\n"), "{}", done.message);
        assert_eq!(done.message, "exited with code 3");
        env.assert_quota_consistent().await;
        assert_eq!(leftovers(&env).await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_time_limit_or_a_cancel_stops_a_job_and_refunds() {
        let env = docker_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        torch_catalogue(&env, &alice).await;
        let mut long = compute_job("sleeper", Command::Argv(vec!["sleep".into(), "300".into()]));
        long.time_limit_secs = 60;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &long).await.unwrap();
        env.drive().await;
        assert_eq!(compute::compute_task(&env.pool, &alice, t.id).await.unwrap().state, gantry_core::task::TaskState::Running);
        // The clock moves past the limit (the row's start, not the test, waits).
        sqlx::query("UPDATE compute_tasks SET started_at = started_at - 61 WHERE id = ?").bind(t.id).execute(&env.pool).await.unwrap();
        let done = run_to_end(&env, &alice, t.id).await;
        assert_eq!(done.state, gantry_core::task::TaskState::Failed);
        assert!(done.message.contains("time limit of 60 s reached"), "{}", done.message);

        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("unwanted", Command::Argv(vec!["sleep".into(), "300".into()]))).await.unwrap();
        env.drive().await;
        let bob = env.user("bob", "ml-team").await;
        assert!(compute::cancel(&env.pool, &bob, t.id).await.unwrap_err().to_string().contains("only the person who submitted"));
        compute::cancel(&env.pool, &alice, t.id).await.unwrap();
        let done = run_to_end(&env, &alice, t.id).await;
        assert_eq!(done.state, gantry_core::task::TaskState::Cancelled, "{}", done.message);
        assert!(compute::cancel(&env.pool, &alice, t.id).await.unwrap_err().to_string().contains("already finished"));
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        assert_eq!(leftovers(&env).await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn no_image_is_refused_and_no_room_waits_with_the_reason() {
        let env = docker_env(2, 4).await;
        let alice = env.user("alice", "ml-team").await;
        torch_catalogue(&env, &alice).await;
        let mut other = compute_job("jax", Command::Argv(vec!["true".into()]));
        other.framework = "JAX".into();
        let t = compute::submit(&env.pool, &env.admissions, &alice, &other).await.unwrap();
        assert_eq!((t.state, t.message.as_str()), (gantry_core::task::TaskState::Failed, "no image matches framework JAX 2.4 / interpreter Python 3.11"));

        // One of the node's two GPUs is taken, so a 2-GPU task waits (it
        // could run once the GPU is back; one no node could hold fails).
        let mut holder = env.create(&alice, "holder", 1);
        (holder.cpu_millis, holder.memory_mb) = (Some(500), Some(256));
        let holder = env.admissions.create(holder).await.unwrap();
        let mut big = compute_job("big", Command::Argv(vec!["true".into()]));
        big.gpu_count = 2;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &big).await.unwrap();
        assert_eq!(t.state, gantry_core::task::TaskState::Pending);
        assert!(t.message.starts_with("regions with a matching image: local; none has 2 free GPU(s)"), "{}", t.message);
        // First come, first served: a small task of the same group waits behind it.
        let small = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("small", Command::Argv(vec!["true".into()]))).await.unwrap();
        assert_eq!((small.state, small.message.as_str()), (gantry_core::task::TaskState::Pending, "waiting for a decision"));
        compute::cancel(&env.pool, &alice, t.id).await.unwrap();
        compute::evaluate_queue(&env.pool, &env.admissions).await.unwrap();
        assert_eq!(compute::compute_task(&env.pool, &alice, small.id).await.unwrap().state, gantry_core::task::TaskState::Scheduled, "the head left, the next one goes");
        assert_eq!(run_to_end(&env, &alice, small.id).await.state, gantry_core::task::TaskState::Succeeded);

        // The holder's container and volume go with it: a test leaves nothing behind.
        let delete = machines::OperationRequest { machine_id: holder.machine_id, kind: TaskKind::Delete, keep_volume: false };
        machines::request_operation(&env.pool, &alice, delete).await.unwrap();
        env.drive().await;
        assert_eq!(leftovers(&env).await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn tasks_spread_over_two_regions_and_an_image_only_one_has_decides() {
        let env = docker_env(2, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let master = torch_catalogue(&env, &alice).await;
        // Region east: a second engine on its own socket.
        let endpoint = std::env::var("GANTRY_DOCKERD2_ENDPOINT").unwrap_or_else(|_| "unix:///tmp/gantry-dockerd2/docker.sock".into());
        let probe = gantry_platform::executor::DockerExecutor::connect(&endpoint).unwrap();
        if let Err(e) = probe.ping().await {
            panic!("{e}\nThe second Docker Engine is not answering: run `bash scripts/dockerd2.sh` (or set GANTRY_DOCKERD2_ENDPOINT).");
        }
        catalogue::create_region(&env.pool, alice.id, "east", "Region East", "").await.unwrap();
        let name = format!("node-b-{}", rand::random::<u32>());
        let found = gpus::simulated(&name, &SimulatedGpus { count: 2, model: "SIM-A100".into(), memory_mb: 0 });
        let reg = NodeRegistration { name: &name, region_code: "east", docker_endpoint: &endpoint, volume_dir: "", executor: "docker", cpu_count: 0, memory_mb: 0, gpus: &found };
        let node_b = cluster::register_node(&env.pool, reg).await.unwrap();
        let image_b = catalogue::create_region_image(&env.pool, alice.id, "east", IMAGE, "amd64", "training").await.unwrap();
        catalogue::set_link(&env.pool, alice.id, master, image_b.id, true).await.unwrap();

        // Both regions fit: the recorded seeds choose both of them.
        let mut seeds = (1..).map(|s: u64| s.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut regions = Vec::new();
        for i in 0..4 {
            let id = compute::record(&env.pool, &alice, &compute_job(&format!("spread{i}"), Command::Argv(vec!["true".into()]))).await.unwrap();
            compute::evaluate_queue_seeded(&env.pool, &env.admissions, &mut || seeds.next().unwrap()).await.unwrap();
            let t = run_to_end(&env, &alice, id).await;
            assert_eq!(t.state, gantry_core::task::TaskState::Succeeded, "{}", t.message);
            regions.push(t.region.unwrap());
        }
        assert!(regions.contains(&"local".to_string()) && regions.contains(&"east".to_string()), "{regions:?}");

        // An image only region east has: always east.
        let only_b = catalogue::create_master_image(
            &env.pool,
            alice.id,
            &NewMasterImage { name: "tf", interpreter: "Python", interpreter_version: "3.12", framework: "TensorFlow", framework_version: "2.17" },
        )
        .await
        .unwrap();
        catalogue::set_link(&env.pool, alice.id, only_b, image_b.id, true).await.unwrap();
        for i in 0..3 {
            let mut tf = compute_job(&format!("tf{i}"), Command::Argv(vec!["true".into()]));
            (tf.framework, tf.framework_version, tf.interpreter_version) = ("TensorFlow".into(), "2.17".into(), "3.12".into());
            let t = compute::submit(&env.pool, &env.admissions, &alice, &tf).await.unwrap();
            assert_eq!(t.region.as_deref(), Some("east"));
            assert_eq!(run_to_end(&env, &alice, t.id).await.node.as_deref(), Some(name.as_str()));
        }
        let instance = gantry_platform::machines::instance_id(&env.pool).await.unwrap();
        let exec_b = env.dispatcher.fleet.executor(&env.pool, node_b).await.unwrap();
        assert_eq!(exec_b.list_managed(&instance).await.unwrap().len(), 0);
        env.assert_quota_consistent().await;
    }
}
