//! A real `gantry serve` child process on 127.0.0.1, for tests that need
//! the whole binary (background services, restarts, two processes on one
//! database). Killed by its PID when dropped.

use gantry_testkit::serve::browser;
use reqwest::StatusCode;
use std::{
    net::SocketAddr,
    path::Path,
    process::{Child, Command},
    time::{Duration, Instant},
};

pub struct ChildServer {
    child: Child,
    pub addr: SocketAddr,
    /// Signed in as the first administrator.
    pub client: reqwest::Client,
}

impl ChildServer {
    /// Sends SIGTERM (what a service manager's stop does) and waits (at
    /// most a minute) for the process to end; its exit status. One that
    /// does not end is killed before the test fails, never left running.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("kill is installed");
        assert!(sent.success(), "could not signal gantry serve (pid {pid})");
        // Another process: its exit status is the only signal.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for gantry serve") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("gantry serve (pid {pid}) did not end within 60 s of SIGTERM; killed");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// Starts `gantry serve` over `data_dir` with `env` on top of the basics,
/// waits (bounded) for `/healthz`, and signs the admin in. Its log (the
/// tracing output on stdout) and stderr go to `data_dir/log`.
pub async fn spawn(data_dir: &Path, log: &str, admin_password: &str, env: &[(&str, &str)]) -> ChildServer {
    let addr = free_addr();
    let log = std::fs::File::create(data_dir.join(log)).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_gantry"));
    command
        .arg("serve")
        .env("GANTRY_DATA_DIR", data_dir)
        .env("GANTRY_LISTEN", addr.to_string())
        .env("GANTRY_SITE_ROOT", data_dir.join("no-site"))
        .env("GANTRY_ADMIN_PASSWORD", admin_password)
        .env("RUST_LOG", "warn")
        // The local node sits on the test machine's own disk, whose free
        // space is not the test's to judge (a CI disk may well hold less
        // than the default 10 GB floor); the floor has tests of its own
        // (platform disk_quotas, server disk_http) with figures they set.
        .env("GANTRY_NODE_DISK_FLOOR_GB", "0")
        // The SSH gateway's default port (2222) is one per machine: test
        // servers run side by side, so each has it off unless a test asks.
        .env("GANTRY_SSH_LISTEN", "")
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    for (k, v) in env {
        command.env(k, v);
    }
    let child = command.spawn().expect("start gantry serve");
    let client = browser(addr, None);
    // A separate process: polling its health route is the only signal.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("http://{addr}/healthz")).send().await {
            if r.status() == StatusCode::OK {
                break;
            }
        }
        assert!(Instant::now() < deadline, "gantry serve on {addr} did not answer /healthz within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let login = gantry_testkit::serve::sign_in(&client, addr, "admin", admin_password).await;
    assert_eq!(login.status(), StatusCode::OK);
    ChildServer { child, addr, client }
}
