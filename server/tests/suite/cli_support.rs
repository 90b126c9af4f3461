//! What the CLI tests share: a real `gantry serve` child process, a
//! connection to its database (to set up what the portal's admin would),
//! and the `gantry` binary run as a user runs it — a child process with
//! its own temporary HOME and GANTRY_CONFIG_DIR, standard input given,
//! and its exit status, standard output and standard error read back.

use crate::common::child::{self, ChildServer};
use gantry_core::Role;
use gantry_platform::{accounts::User, db};
use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

pub const ADMIN_PASSWORD: &str = "cli-admin-password-1";
pub const PASSWORD: &str = "alice-password-1";

pub struct CliServer {
    _server: ChildServer,
    pub pool: db::Pool,
    pub url: String,
    /// The user's home and config directory (each test its own).
    pub home: PathBuf,
    _dir: tempfile::TempDir,
}

/// A server with `executor` (`simulated` or `docker`) and user `alice`.
pub async fn start(executor: &str) -> (CliServer, User) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // No SSH gateway: its default port (2222) is one for the whole
    // machine, and the tests' servers run side by side.
    let env = [
        ("GANTRY_EXECUTOR", executor),
        ("GANTRY_NODE_NAME", "local"),
        ("GANTRY_SIM_GPUS", "4"),
        ("GANTRY_SSH_LISTEN", ""),
    ];
    let server = child::spawn(&data, "log", ADMIN_PASSWORD, &env).await;
    let pool = db::connect_file(&data.join("gantry.db")).await.unwrap();
    let alice = gantry_testkit::install::user(&pool, "alice", PASSWORD, Role::User, None).await;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let url = format!("http://{}", server.addr);
    (CliServer { _server: server, pool, url, home, _dir: dir }, alice)
}

/// What one run of the CLI left.
#[derive(Debug)]
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

impl CliServer {
    pub fn config_dir(&self) -> PathBuf {
        self.home.join("config")
    }

    pub fn credentials(&self) -> PathBuf {
        self.config_dir().join("credentials.json")
    }

    /// `gantry ARGS` as the user, with `stdin` on its standard input.
    pub async fn cli(&self, args: &[&str], stdin: &str) -> Run {
        self.cli_env(args, stdin, &[]).await
    }

    pub async fn cli_env(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Run {
        run_cli(&self.home, &self.config_dir(), args, stdin, env).await
    }

    /// `gantry login` as alice, with her password on standard input.
    pub async fn login(&self) {
        let run =
            self.cli(&["login", &self.url, "--username", "alice", "--password-stdin"], &format!("{PASSWORD}\n")).await;
        assert!(run.ok, "login failed: {run:?}");
    }
}

pub async fn run_cli(home: &Path, config: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gantry"));
    command
        .args(args)
        .env("HOME", home)
        .env("GANTRY_CONFIG_DIR", config)
        .env_remove("GANTRY_URL")
        .env_remove("GANTRY_TOKEN")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let stdin = stdin.to_string();
    // A child process: its exit is waited for on a blocking thread, bounded
    // by the test's own time limit.
    tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().expect("run gantry");
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}
