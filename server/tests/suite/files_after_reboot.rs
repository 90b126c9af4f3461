//! The Files tab of a stopped machine after a host reboot, over real HTTP
//! with a real block volume (root, losetup, the local Docker Engine): the
//! engine mounts a stopped container's volume for each archive call, so
//! the route first puts the machine's own image back on its recorded loop
//! device, and refuses — without naming host paths — when that device now
//! holds another file.

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser},
    cluster::{self, NodeRegistration},
    db,
    dispatch::{self, Dispatcher},
    executor::loopdev,
    fleet::Fleet,
    gpus::{self, SimulatedGpus},
    images,
    machines::{self, Admissions, CreateMachine},
    workspace::Limits,
};
use gantry_server::router;
use reqwest::StatusCode;
use std::{process::Command, sync::Arc};
use tokio::sync::Notify;

const PASSWORD: &str = "a-good-password";

fn losetup(args: &[&str]) -> String {
    let out = Command::new("losetup").args(args).output().unwrap();
    assert!(out.status.success(), "losetup {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

gantry_testkit::timed_test! {
    async fn a_stopped_machines_files_use_its_own_image_or_are_refused_plainly() {
        if loopdev::enabled().is_err() {
            panic!("loop volumes need root with losetup and mkfs.ext4: {:?}", loopdev::enabled());
        }
        let dir = tempfile::tempdir().unwrap();
        let volumes = dir.path().join("volumes");
        let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
        db::migrate(&pool).await.unwrap();
        let node = format!("node-{:08x}", rand::random::<u32>());
        let found = gpus::simulated(&node, &SimulatedGpus { count: 1, model: "SIM-A100".into(), memory_mb: 1024 });
        let registration = NodeRegistration {
            name: &node,
            region_code: "local",
            docker_endpoint: "unix:///var/run/docker.sock",
            volume_dir: volumes.to_str().unwrap(),
            executor: "docker",
            cpu_count: 2,
            memory_mb: 1024,
            gpus: &found,
        };
        let node_id = cluster::register_node(&pool, registration).await.unwrap();
        images::ensure_default_image(&pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
        accounts::create_group(&pool, None, "ml-team", 1).await.unwrap();
        let alice = accounts::create_user(&pool, None, NewUser { username: "alice", password: PASSWORD, role: Role::User, group: Some("ml-team") })
            .await
            .unwrap();
        let wake = Arc::new(Notify::new());
        let admissions = Admissions::start(pool.clone(), wake.clone());
        let dispatcher = Dispatcher::new(pool.clone(), Fleet::new(), wake.clone(), 4);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = router::Options { site_root: dir.path().join("site"), site_addr: addr, secure_cookies: false, public_origin: None, page_cache_ms: router::PAGE_CACHE_MS };
        let app = router::build_full(opts, Limits::default(), pool.clone(), admissions.clone(), wake, Fleet::new()).await.unwrap();
        tokio::spawn(async move { router::serve(listener, app).await.unwrap() });

        let made = admissions.create(CreateMachine::new(alice.clone(), "stopped", 1, 1)).await.unwrap();
        let drive = || async {
            loop {
                let claimed = dispatch::claim(&pool, &dispatcher.owner, 16).await.unwrap();
                if claimed.is_empty() {
                    return;
                }
                for task in claimed {
                    dispatcher.execute(task).await;
                }
            }
        };
        drive().await;
        let m = machines::machine_detail(&pool, &alice, made.machine_id).await.unwrap();
        assert!(m.state == gantry_core::task::MachineState::Running && m.volume_enforced, "{} {}", m.state, m.message);
        let exec = dispatcher.fleet.executor(&pool, node_id).await.unwrap();
        let container = m.container_id.clone().unwrap();
        assert_eq!(exec.exec(&container, &["sh", "-c", "echo mine > /data/f"]).await.unwrap().0, 0);
        let docker = bollard::Docker::connect_with_defaults().unwrap().negotiate_version().await.unwrap();
        let device = docker.inspect_volume(&m.volume_name).await.unwrap().options["device"].clone();
        let image = loopdev::image_path(&volumes, &m.volume_name);

        let res = reqwest::Client::new()
            .post(format!("http://{addr}/api/login"))
            .header("Origin", format!("http://{addr}"))
            .form(&[("username", "alice"), ("password", PASSWORD)])
            .send()
            .await
            .unwrap();
        let cookie = gantry_testkit::session_cookie(res.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok())).unwrap();
        let get_f = || reqwest::Client::new().get(format!("http://{addr}/machines/{}/files?path=f", made.machine_id)).header("Cookie", &cookie).send();

        // "Reboot", and another file got the machine's device first.
        exec.stop_container(&container).await.unwrap();
        losetup(&[&format!("--detach={device}")]);
        let stranger = dir.path().join("stranger.img");
        std::fs::File::create(&stranger).unwrap().set_len(16 << 20).unwrap();
        losetup(&["--", &device, stranger.to_str().unwrap()]);
        let res = get_f().await.unwrap();
        assert_eq!(res.status(), StatusCode::CONFLICT);
        let text = res.text().await.unwrap();
        assert!(text.contains("cannot be opened") && !text.contains("/dev/") && !text.contains(dir.path().to_str().unwrap()), "{text}");
        assert!(loopdev::attached_devices(&image).unwrap().is_empty(), "nothing of ours attached or mounted");

        // The device is free again: the route re-attaches our image first.
        losetup(&[&format!("--detach={device}")]);
        let res = get_f().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.text().await.unwrap(), "mine\n");
        assert_eq!(loopdev::attached_devices(&image).unwrap(), vec![device.clone()]);

        let delete = machines::OperationRequest { machine_id: made.machine_id, kind: gantry_core::task::TaskKind::Delete, keep_volume: false };
        machines::request_operation(&pool, &alice, delete).await.unwrap();
        drive().await;
        assert!(!image.exists(), "image file removed");
    }
}
