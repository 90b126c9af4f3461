//! `gantry-bench terminal`: figures for the browser terminal, printed, not
//! asserted.
//!
//! A real `gantry serve` is started as a child process (the `gantry` binary
//! beside this one, on a
//! temporary data directory and 127.0.0.1, driving the local Docker Engine)
//! with one running dev machine. Then, in the same run:
//!
//! 1. keystroke echo round trips (p50/p99 over N keystrokes, one at a time:
//!    send a letter, wait for its echo) into `cat` on the machine's TTY —
//!    through Gantry's WebSocket, through the executor's own exec attach
//!    (no WebSocket, no server), and through `docker exec -it` (under
//!    `script`, which gives it the pseudo-terminal `-t` needs);
//! 2. the child server's resident memory with 0 and with M terminals open
//!    (each one live: it answers an `echo`), per terminal.

use futures_util::{SinkExt, StreamExt};
use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser},
    db,
    executor::{
        inside::{Shell, TtySize},
        DockerExecutor, Executor,
    },
    policy, PlatformError,
};
use std::{
    net::SocketAddr,
    process::Stdio,
    time::{Duration, Instant},
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Message};

#[derive(Debug, Clone, clap::Args)]
pub struct TerminalBenchArgs {
    /// Keystrokes timed on each path.
    #[arg(long, default_value_t = 1000)]
    pub keystrokes: usize,
    /// Terminals held open at once for the memory figure.
    #[arg(long, default_value_t = 50)]
    pub terminals: usize,
    /// The Docker Engine of the machine (the child server's local node).
    #[arg(long, env = "GANTRY_DOCKER_ENDPOINT", default_value = "unix:///var/run/docker.sock")]
    pub docker_endpoint: String,
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The `gantry` binary built beside `gantry-bench` (same profile).
fn gantry_binary() -> Result<std::path::PathBuf, PlatformError> {
    let me = std::env::current_exe().map_err(fail)?;
    let gantry = me.with_file_name("gantry");
    if !gantry.exists() {
        return Err(fail(format!("{} not found: build it first (cargo build --release -p server)", gantry.display())));
    }
    Ok(gantry)
}

fn fail(e: impl std::fmt::Display) -> PlatformError {
    PlatformError::Internal(e.to_string())
}

const PASSWORD: &str = "bench-password-1";

pub async fn run(args: TerminalBenchArgs) -> Result<(), PlatformError> {
    let docker = DockerExecutor::connect(&args.docker_endpoint).map_err(fail)?;
    docker.ping().await.map_err(|e| fail(format!("{e}; run scripts/dockerd.sh and scripts/demo-image.sh")))?;
    let dir = tempfile::tempdir().map_err(fail)?;
    let mut child = Child::start(dir.path(), &args.docker_endpoint).await?;
    let engine = Executor::from(docker);
    let result = bench(&args, &child, engine.clone()).await;
    let instance = gantry_platform::machines::instance_id(&child.pool).await;
    child.stop().await;
    // Whatever the run left (after an error, say) goes, by this run's label.
    if let Ok(instance) = instance {
        for c in engine.list_managed(&instance).await.unwrap_or_default() {
            let _ = engine.remove_container(&c.id).await;
        }
        for v in engine.list_managed_volumes(&instance).await.unwrap_or_default() {
            let _ = engine.remove_volume(&v).await;
        }
    }
    result
}

struct Child {
    process: tokio::process::Child,
    addr: SocketAddr,
    pool: db::Pool,
}

impl Child {
    async fn start(dir: &std::path::Path, endpoint: &str) -> Result<Child, PlatformError> {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(fail)?;
            l.local_addr().map_err(fail)?.port()
        };
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let process = tokio::process::Command::new(gantry_binary()?)
            .arg("serve")
            .env("GANTRY_DATA_DIR", dir)
            .env("GANTRY_LISTEN", addr.to_string())
            .env("GANTRY_SITE_ROOT", dir.join("site"))
            .env("GANTRY_ADMIN_PASSWORD", PASSWORD)
            .env("GANTRY_EXECUTOR", "docker")
            .env("GANTRY_DOCKER_ENDPOINT", endpoint)
            .env("GANTRY_NODE_NAME", format!("bench-{:08x}", rand::random::<u32>()))
            .env("GANTRY_LOOP_VOLUMES", "0")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(fail)?;
        let http = reqwest::Client::new();
        let started = Instant::now();
        while !http.get(format!("http://{addr}/healthz")).send().await.is_ok_and(|r| r.status().is_success()) {
            if started.elapsed() > Duration::from_secs(60) {
                return Err(fail("the child server did not answer /healthz within 60 s"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let pool = db::connect_file(&dir.join("gantry.db")).await?;
        Ok(Child { process, addr, pool })
    }

    fn rss_kib(&self) -> u64 {
        let pid = self.process.id().unwrap_or(0);
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    }

    async fn stop(&mut self) {
        if let Some(pid) = self.process.id() {
            let _ = tokio::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status().await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), self.process.wait()).await;
        let _ = self.process.kill().await;
    }
}

async fn bench(args: &TerminalBenchArgs, child: &Child, docker: Executor) -> Result<(), PlatformError> {
    let addr = child.addr;
    // A user with room for one machine.
    let group = accounts::ensure_default_group(&child.pool).await?;
    policy::update_group_policy(&child.pool, None, group, 8, 8, &[]).await?;
    accounts::create_user(
        &child.pool,
        None,
        NewUser { username: "bench", password: PASSWORD, role: Role::User, group: None },
    )
    .await?;
    let cookie = sign_in(addr, "bench").await?;
    let http = reqwest::Client::new();
    let post = |path: &str, form: Vec<(&'static str, String)>| {
        http.post(format!("http://{addr}{path}"))
            .header("Cookie", &cookie)
            .header("Origin", format!("http://{addr}"))
            .form(&form)
            .send()
    };
    let created = post(
        "/api/create_machine",
        vec![
            ("name", "termbench".into()),
            ("image_id", String::new()),
            ("gpu_count", "1".into()),
            ("gpu_model", String::new()),
            ("volume_size_gb", "1".into()),
        ],
    )
    .await
    .map_err(fail)?;
    let body: serde_json::Value = created.json().await.map_err(fail)?;
    let machine_id = body["machine_id"].as_i64().ok_or_else(|| fail(format!("create refused: {body}")))?;
    let container = wait_running(&child.pool, machine_id).await?;
    println!("machine #{machine_id} running in container {}", &container[..12.min(container.len())]);

    // 1. Echo latency, each path in turn.
    let n = args.keystrokes;
    let mut ws = open_ws(addr, &cookie, machine_id).await?;
    let gantry = echo_ws(&mut ws, n).await?;
    let _ = ws.close(None).await;
    let mut shell = docker.open_shell(&container, TtySize::default()).await.map_err(fail)?;
    let direct = echo_shell(&mut shell, n).await?;
    drop(shell);
    let cli = echo_docker_cli(&container, n).await?;
    println!("keystroke echo into `cat` on the machine's TTY, {n} keystrokes one at a time (ms):");
    println!(
        "  {:<44} p50 {:>7.3}  p99 {:>7.3}  max {:>7.3}",
        "gantry (browser WebSocket -> server -> exec)",
        pct(&gantry, 50.0),
        pct(&gantry, 99.0),
        pct(&gantry, 100.0)
    );
    println!(
        "  {:<44} p50 {:>7.3}  p99 {:>7.3}  max {:>7.3}",
        "executor exec attach (no WebSocket/server)",
        pct(&direct, 50.0),
        pct(&direct, 99.0),
        pct(&direct, 100.0)
    );
    println!(
        "  {:<44} p50 {:>7.3}  p99 {:>7.3}  max {:>7.3}",
        "docker exec -it (under script)",
        pct(&cli, 50.0),
        pct(&cli, 99.0),
        pct(&cli, 100.0)
    );

    // 2. Memory per open terminal. Let the closes above settle first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = child.rss_kib();
    let m = args.terminals;
    let mut open = Vec::with_capacity(m);
    for _ in 0..m {
        open.push(open_ws(addr, &cookie, machine_id).await?);
    }
    for (i, ws) in open.iter_mut().enumerate() {
        let marker = format!("live{i}x");
        ws.send(Message::Binary(format!("echo {marker}\r").into_bytes().into())).await.map_err(fail)?;
        read_ws_until(ws, format!("\n{marker}").as_bytes()).await?;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = child.rss_kib();
    let sessions: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM terminal_sessions WHERE closed_at IS NULL")
        .fetch_one(&child.pool)
        .await?;
    for ws in open.iter_mut() {
        let _ = ws.close(None).await;
    }
    drop(open);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = child.rss_kib();
    println!("server memory (VmRSS of the gantry serve process):");
    println!("  no terminal open: {:.1} MiB; {m} open ({sessions} sessions recorded, each answered an echo): {:.1} MiB; after closing them: {:.1} MiB", mib(before), mib(during), mib(after));
    println!("  per open terminal: {:.1} KiB", (during.saturating_sub(before)) as f64 / m.max(1) as f64);

    // Clean up the way a user would.
    let res =
        post("/api/machine_operation", vec![("machine_id", machine_id.to_string()), ("operation", "delete".into())])
            .await
            .map_err(fail)?;
    if !res.status().is_success() {
        println!("(deleting the machine was refused: {})", res.text().await.unwrap_or_default());
        return Ok(());
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let state: String = sqlx::query_scalar("SELECT state FROM machines WHERE id = ?")
            .bind(machine_id)
            .fetch_one(&child.pool)
            .await?;
        if state == "deleted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn pct(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let idx = ((p / 100.0) * (s.len() - 1) as f64).round() as usize;
    s[idx.min(s.len() - 1)]
}

async fn sign_in(addr: SocketAddr, user: &str) -> Result<String, PlatformError> {
    let res = reqwest::Client::new()
        .post(format!("http://{addr}/api/login"))
        .header("Origin", format!("http://{addr}"))
        .form(&[("username", user), ("password", PASSWORD)])
        .send()
        .await
        .map_err(fail)?;
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("gantry_session="))
        .and_then(|c| c.split(';').next())
        .map(str::to_string)
        .ok_or_else(|| fail(format!("sign-in failed: {}", res.status())))
}

async fn wait_running(pool: &db::Pool, machine_id: i64) -> Result<String, PlatformError> {
    let started = Instant::now();
    loop {
        let (state, container, message): (String, Option<String>, String) =
            sqlx::query_as("SELECT state, container_id, message FROM machines WHERE id = ?")
                .bind(machine_id)
                .fetch_one(pool)
                .await?;
        match (state.as_str(), container) {
            ("running", Some(c)) => return Ok(c),
            ("failed" | "deleted" | "lost", _) => return Err(fail(format!("the machine is {state}: {message}"))),
            _ if started.elapsed() > Duration::from_secs(120) => {
                return Err(fail("the machine did not run within 120 s"))
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn open_ws(addr: SocketAddr, cookie: &str, machine_id: i64) -> Result<Ws, PlatformError> {
    let mut req =
        format!("ws://{addr}/machines/{machine_id}/terminal?cols=120&rows=40").into_client_request().map_err(fail)?;
    req.headers_mut().insert("Cookie", cookie.parse().map_err(fail)?);
    req.headers_mut().insert("Origin", format!("http://{addr}").parse().map_err(fail)?);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(req, None, true).await.map_err(fail)?;
    // The prompt: the shell is ready.
    read_ws_until(&mut ws, b"# ").await?;
    Ok(ws)
}

async fn read_ws_until(ws: &mut Ws, needle: &[u8]) -> Result<(), PlatformError> {
    let mut seen: Vec<u8> = Vec::new();
    let read = async {
        while let Some(msg) = ws.next().await {
            if let Message::Binary(b) = msg.map_err(fail)? {
                seen.extend_from_slice(&b);
                if seen.windows(needle.len()).any(|w| w == needle) {
                    return Ok(());
                }
                if seen.len() > 1 << 16 {
                    seen.drain(..seen.len() - needle.len());
                }
            }
        }
        Err(fail("the terminal closed"))
    };
    match tokio::time::timeout(Duration::from_secs(30), read).await {
        Ok(r) => r,
        Err(_) => Err(fail(format!(
            "no {:?} from the terminal within 30 s; it printed {:?}",
            String::from_utf8_lossy(needle),
            String::from_utf8_lossy(&seen[seen.len().saturating_sub(300)..])
        ))),
    }
}

const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
/// Not a letter: a late probe echo never passes for a keystroke's.
const PROBE: &[u8] = b".";

/// Types into `cat`, one letter at a time, timing each echo; a newline
/// every 64 letters keeps the line short.
async fn echo_ws(ws: &mut Ws, n: usize) -> Result<Vec<f64>, PlatformError> {
    ws.send(Message::Binary(b"exec cat >/dev/null\r".to_vec().into())).await.map_err(fail)?;
    read_ws_until(ws, b"/dev/null\r\n").await?;
    // The shell hands the TTY (echo on) to cat a moment after the newline:
    // probe until a probe's echo comes back.
    let mut synced = false;
    for _ in 0..100 {
        ws.send(Message::Binary(PROBE.to_vec().into())).await.map_err(fail)?;
        if tokio::time::timeout(Duration::from_millis(200), read_ws_until(ws, PROBE)).await.is_ok() {
            synced = true;
            break;
        }
    }
    if !synced {
        return Err(fail("the terminal never echoed"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let c = LETTERS[i % LETTERS.len()];
        let t = Instant::now();
        ws.send(Message::Binary(vec![c].into())).await.map_err(fail)?;
        read_ws_until(ws, &[c]).await?;
        out.push(t.elapsed().as_secs_f64() * 1000.0);
        if i % 64 == 63 {
            ws.send(Message::Binary(b"\r".to_vec().into())).await.map_err(fail)?;
            read_ws_until(ws, b"\n").await?;
        }
    }
    Ok(out)
}

async fn echo_shell(shell: &mut Shell, n: usize) -> Result<Vec<f64>, PlatformError> {
    async fn until(shell: &mut Shell, needle: &[u8]) -> Result<(), PlatformError> {
        let mut seen = Vec::new();
        let read = async {
            while let Some(chunk) = shell.output.next().await {
                seen.extend_from_slice(&chunk.map_err(fail)?);
                if seen.windows(needle.len()).any(|w| w == needle) {
                    return Ok(());
                }
            }
            Err(fail("the shell closed"))
        };
        tokio::time::timeout(Duration::from_secs(30), read).await.map_err(|_| fail("no echo within 30 s"))?
    }
    until(shell, b"# ").await?;
    shell.input.write_all(b"exec cat >/dev/null\r").await.map_err(fail)?;
    until(shell, b"/dev/null\r\n").await?;
    let mut synced = false;
    for _ in 0..100 {
        shell.input.write_all(PROBE).await.map_err(fail)?;
        shell.input.flush().await.map_err(fail)?;
        if tokio::time::timeout(Duration::from_millis(200), until(shell, PROBE)).await.is_ok() {
            synced = true;
            break;
        }
    }
    if !synced {
        return Err(fail("the shell never echoed"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let c = LETTERS[i % LETTERS.len()];
        let t = Instant::now();
        shell.input.write_all(&[c]).await.map_err(fail)?;
        shell.input.flush().await.map_err(fail)?;
        until(shell, &[c]).await?;
        out.push(t.elapsed().as_secs_f64() * 1000.0);
        if i % 64 == 63 {
            shell.input.write_all(b"\r").await.map_err(fail)?;
            until(shell, b"\n").await?;
        }
    }
    Ok(out)
}

/// `docker exec -it` needs a terminal on its side: `script` gives it a
/// pseudo-terminal and relays our pipes to it.
async fn echo_docker_cli(container: &str, n: usize) -> Result<Vec<f64>, PlatformError> {
    let cmd = format!("docker exec -it {container} sh -c 'echo READY; exec cat >/dev/null'");
    let mut child = tokio::process::Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("cannot run script(1) for docker exec -it: {e}")))?;
    let mut stdin = child.stdin.take().ok_or_else(|| fail("no stdin"))?;
    let mut stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
    async fn until(stdout: &mut tokio::process::ChildStdout, needle: &[u8]) -> Result<(), PlatformError> {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let read = async {
            loop {
                let k = stdout.read(&mut buf).await.map_err(fail)?;
                if k == 0 {
                    return Err(fail("docker exec ended"));
                }
                seen.extend_from_slice(&buf[..k]);
                if seen.windows(needle.len()).any(|w| w == needle) {
                    return Ok(());
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .map_err(|_| fail("no echo from docker exec within 30 s"))?
    }
    until(&mut stdout, b"READY").await?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let c = LETTERS[i % LETTERS.len()];
        let t = Instant::now();
        stdin.write_all(&[c]).await.map_err(fail)?;
        stdin.flush().await.map_err(fail)?;
        until(&mut stdout, &[c]).await?;
        out.push(t.elapsed().as_secs_f64() * 1000.0);
        if i % 64 == 63 {
            stdin.write_all(b"\r").await.map_err(fail)?;
            until(&mut stdout, b"\n").await?;
        }
    }
    let _ = stdin.write_all(&[4]).await;
    drop(stdin);
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    let _ = child.kill().await;
    Ok(out)
}
