//! Inside a dev machine over real HTTP and WebSocket, against the real
//! router on 127.0.0.1:0 and the real local Docker Engine: the terminal
//! (commands, resize, who is refused at the upgrade, closes with a reason
//! on delete, by an admin, when idle), files in and out of the volume
//! (50 MB round trip, traversal, symbolic links, missing files, limits,
//! the no-JavaScript form), and logs (followed in order; the last lines).
//!
//! Needs `bash scripts/dockerd.sh && bash scripts/demo-image.sh`.

use futures_util::{SinkExt, StreamExt};
use gantry_core::{task::TaskKind, Role};
use gantry_platform::{
    accounts::{self, NewUser, User},
    cluster::{self, NodeRegistration},
    db,
    dispatch::{self, Dispatcher},
    executor::{DockerExecutor, Executor},
    fleet::Fleet,
    gpus::{self, SimulatedGpus},
    images,
    machines::{self, Admissions, CreateMachine, OperationRequest},
    policy,
    workspace::{sessions, Limits},
};
use gantry_server::{bootstrap, router, routes::terminal::close_code, security::Security};
use gantry_testkit::{install::Install, serve::Served};
use reqwest::StatusCode;
use sha2::{Digest, Sha256};
use std::{net::SocketAddr, sync::Arc};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, Message};

const ADMIN_PASSWORD: &str = "admin-password-1";
pub(crate) const PASSWORD: &str = "a-good-password";

pub(crate) type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub(crate) struct Env {
    _dir: tempfile::TempDir,
    pub(crate) pool: db::Pool,
    pub(crate) addr: SocketAddr,
    admissions: Admissions,
    dispatcher: Dispatcher,
    instance: String,
    node_id: i64,
    pub(crate) alice: User,
    admin: User,
}

impl Drop for Env {
    /// Whatever a failed test left on the engine goes (by this run's
    /// instance label), so runs never pile up containers.
    fn drop(&mut self) {
        let label = format!("label=gantry.instance={}", self.instance);
        if let Ok(out) = std::process::Command::new("docker").args(["ps", "-aq", "--filter", &label]).output() {
            for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = std::process::Command::new("docker").args(["rm", "-f", id]).output();
            }
        }
        if let Ok(out) = std::process::Command::new("docker").args(["volume", "ls", "-q", "--filter", &label]).output()
        {
            for v in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = std::process::Command::new("docker").args(["volume", "rm", "-f", v]).output();
            }
        }
    }
}

pub(crate) async fn env(limits: Limits) -> Env {
    env_secured(limits, Security::default()).await
}

/// [`env`] with explicit security settings (e.g. behind a trusted proxy).
pub(crate) async fn env_secured(limits: Limits, security: Security) -> Env {
    let Install { dir, pool } = Install::new().await;
    bootstrap::ensure_admin(&pool, "admin", Some(ADMIN_PASSWORD)).await.unwrap();
    let node = format!("node-{:08x}", rand::random::<u32>());
    let found = gpus::simulated(&node, &SimulatedGpus { count: 4, model: "SIM-A100".into(), memory_mb: 1024 });
    let node_id = cluster::register_node(
        &pool,
        NodeRegistration {
            name: &node,
            region_code: "local",
            docker_endpoint: "unix:///var/run/docker.sock",
            volume_dir: "",
            executor: "docker",
            cpu_count: 2,
            memory_mb: 1024,
            gpus: &found,
        },
    )
    .await
    .unwrap();
    let engine = Executor::from(DockerExecutor::connect("unix:///var/run/docker.sock").unwrap());
    if let Err(e) = engine.ping().await {
        panic!(
            "{e}\nThe Docker Engine is not answering: run `bash scripts/dockerd.sh` and `bash scripts/demo-image.sh`."
        );
    }
    images::ensure_default_image(&pool, "devbox", "gantry/devbox:latest", "demo").await.unwrap();
    let default_group = accounts::ensure_default_group(&pool).await.unwrap();
    policy::update_group_policy(&pool, None, default_group, 4, 4, &[]).await.unwrap();
    accounts::create_group(&pool, None, "other", 4).await.unwrap();
    let user = |name: &'static str, group: &'static str| {
        let pool = pool.clone();
        async move {
            accounts::create_user(
                &pool,
                None,
                NewUser { username: name, password: PASSWORD, role: Role::User, group: Some(group) },
            )
            .await
            .unwrap()
        }
    };
    let alice = user("alice", "default").await;
    user("bob", "default").await;
    user("carol", "other").await;
    let admin = accounts::list_users(&pool).await.unwrap().into_iter().find(|u| u.username == "admin").unwrap();
    let instance = machines::instance_id(&pool).await.unwrap();

    let wake = Arc::new(Notify::new());
    let admissions = Admissions::start(pool.clone(), wake.clone());
    let dispatcher = Dispatcher::new(pool.clone(), Fleet::new(), wake.clone(), 4);
    let (router_pool, router_admissions, fleet) = (pool.clone(), admissions.clone(), dispatcher.fleet.clone());
    let served = Served::start(dir.path().join("site"), false, |opts| async move {
        router::build_secured(opts, security, limits, router_pool, router_admissions, wake, fleet).await.unwrap()
    })
    .await;
    let addr = served.addr;
    Env { _dir: dir, pool, addr, admissions, dispatcher, instance, node_id, alice, admin }
}

impl Env {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Runs every due task to its end, in order.
    async fn drive(&self) {
        loop {
            let claimed = dispatch::claim(&self.pool, &self.dispatcher.owner, 16).await.unwrap();
            if claimed.is_empty() {
                return;
            }
            for task in claimed {
                self.dispatcher.execute(task).await;
            }
        }
    }

    /// A running machine of `owner`: its id and container.
    pub(crate) async fn machine(&self, owner: &User, name: &str) -> (i64, String) {
        let admitted = self.admissions.create(CreateMachine::new(owner.clone(), name, 1, 1)).await.unwrap();
        self.drive().await;
        let (state, container, message): (String, Option<String>, String) =
            sqlx::query_as("SELECT state, container_id, message FROM machines WHERE id = ?")
                .bind(admitted.machine_id)
                .fetch_one(&self.pool)
                .await
                .unwrap();
        assert_eq!(state, "running", "machine {name}: {message}");
        (admitted.machine_id, container.unwrap())
    }

    pub(crate) async fn operate(&self, machine_id: i64, kind: TaskKind) {
        machines::request_operation(&self.pool, &self.admin, OperationRequest { machine_id, kind, keep_volume: false })
            .await
            .unwrap();
        self.drive().await;
    }

    pub(crate) async fn engine(&self) -> Executor {
        self.dispatcher.fleet.executor(&self.pool, self.node_id).await.unwrap()
    }

    pub(crate) async fn scalar(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
    }
}

/// Signs in through the login server function; the session cookie.
pub(crate) async fn sign_in(env: &Env, user: &str, password: &str) -> String {
    let res = reqwest::Client::new()
        .post(env.url("/api/login"))
        .header("Origin", format!("http://{}", env.addr))
        .form(&[("username", user), ("password", password)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{user} signs in");
    gantry_testkit::session_cookie(res.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()))
        .expect("a session cookie")
}

pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// Opens the terminal WebSocket; `Err(status)` when refused at the upgrade.
pub(crate) async fn connect(
    env: &Env,
    cookie: Option<&str>,
    origin: Option<&str>,
    machine_id: i64,
) -> Result<Ws, StatusCode> {
    let mut req =
        format!("ws://{}/machines/{machine_id}/terminal?cols=80&rows=24", env.addr).into_client_request().unwrap();
    if let Some(c) = cookie {
        req.headers_mut().insert("Cookie", c.parse().unwrap());
    }
    let origin = origin.map(str::to_string).unwrap_or_else(|| format!("http://{}", env.addr));
    req.headers_mut().insert("Origin", origin.parse().unwrap());
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::Error::Http(res)) => Err(StatusCode::from_u16(res.status().as_u16()).unwrap()),
        Err(e) => panic!("unexpected WebSocket error: {e}"),
    }
}

/// Reads terminal output until `needle` appears; everything read.
pub(crate) async fn read_until(ws: &mut Ws, needle: &str) -> String {
    let mut seen = Vec::new();
    while let Some(msg) = ws.next().await {
        match msg.unwrap() {
            Message::Binary(b) => {
                seen.extend_from_slice(&b);
                if String::from_utf8_lossy(&seen).contains(needle) {
                    return String::from_utf8_lossy(&seen).into_owned();
                }
            }
            Message::Close(frame) => {
                panic!("closed before {needle:?} ({frame:?}); output: {}", String::from_utf8_lossy(&seen))
            }
            _ => {}
        }
    }
    panic!("the terminal ended before {needle:?}; output: {}", String::from_utf8_lossy(&seen));
}

/// Reads until the server's close frame (its code and reason), then until
/// the server drops the connection — which it does after recording the
/// close, so the session row is final when this returns.
pub(crate) async fn close_frame(ws: &mut Ws) -> (u16, String) {
    let mut frame = None;
    while let Some(msg) = ws.next().await {
        match msg {
            Ok(Message::Close(f)) => {
                frame = Some(f.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or_default())
            }
            Ok(_) => {}
            Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => break,
            Err(e) if frame.is_some() => {
                eprintln!("after the close frame: {e}");
                break;
            }
            Err(e) => panic!("the terminal failed instead of closing: {e}"),
        }
    }
    frame.expect("the terminal ended without a close frame")
}

pub(crate) async fn type_line(ws: &mut Ws, line: &str) {
    ws.send(Message::Binary(format!("{line}\r").into_bytes().into())).await.unwrap();
}

gantry_testkit::timed_test! {
    async fn a_terminal_runs_commands_resizes_and_refuses_the_wrong_people() {
        let env = env(Limits::default()).await;
        let (id, container) = env.machine(&env.alice.clone(), "term-1").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;

        let mut ws = connect(&env, Some(&alice), None, id).await.expect("the owner connects");
        read_until(&mut ws, "/data # ").await;
        type_line(&mut ws, "echo $((6*7))").await;
        read_until(&mut ws, "\r\n42\r\n").await;
        // Resize is passed through to the TTY.
        ws.send(Message::Text(r#"{"resize":{"cols":100,"rows":37}}"#.into())).await.unwrap();
        type_line(&mut ws, "stty size").await;
        read_until(&mut ws, "37 100").await;
        // The session is recorded and audited.
        assert_eq!(env.scalar("SELECT COUNT(*) FROM terminal_sessions WHERE closed_at IS NULL").await, 1);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'terminal.open'").await, 1);
        // The browser closes: the server answers the close handshake.
        ws.close(None).await.unwrap();
        close_frame(&mut ws).await;
        assert_eq!(env.scalar("SELECT COUNT(*) FROM terminal_sessions WHERE closed_at IS NULL").await, 0, "closed at once");
        let detail: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'terminal.close'").fetch_one(&env.pool).await.unwrap();
        assert!(detail.contains("closed after") && detail.contains("term-1"), "{detail}");
        // Its shell was hung up, as closing a terminal window does.
        let (_, ps) = env.engine().await.exec(&container, &["ps", "-o", "pid,args"]).await.unwrap();
        assert!(!ps.lines().any(|l| l.trim_end().ends_with("/bin/sh")), "no shell left behind:\n{ps}");

        // The preflight (no upgrade headers) says a terminal can open.
        let res = http().get(env.url(&format!("/machines/{id}/terminal"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);

        // Refused at the upgrade: another group's user (not found), a group
        // member who is not the owner, a foreign Origin, no session.
        let carol = sign_in(&env, "carol", PASSWORD).await;
        assert_eq!(connect(&env, Some(&carol), None, id).await.err(), Some(StatusCode::NOT_FOUND));
        let bob = sign_in(&env, "bob", PASSWORD).await;
        assert_eq!(connect(&env, Some(&bob), None, id).await.err(), Some(StatusCode::FORBIDDEN));
        assert_eq!(connect(&env, Some(&alice), Some("http://evil.example"), id).await.err(), Some(StatusCode::FORBIDDEN));
        let Err(anonymous) = connect(&env, None, None, id).await else { panic!("anonymous is refused") };
        assert!(anonymous.is_redirection() || anonymous == StatusCode::UNAUTHORIZED, "anonymous: {anonymous}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM terminal_sessions").await, 1, "no session for the refused");

        // An administrator may connect too.
        let admin = sign_in(&env, "admin", ADMIN_PASSWORD).await;
        let mut ws = connect(&env, Some(&admin), None, id).await.expect("an admin connects");
        read_until(&mut ws, "# ").await;
        ws.close(None).await.unwrap();
        close_frame(&mut ws).await;

        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn behind_a_trusted_proxy_a_terminal_records_the_forwarded_client() {
        let env = env_secured(Limits::default(), Security { trusted_proxy: true, ..Security::default() }).await;
        let (id, _container) = env.machine(&env.alice.clone(), "term-proxy").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        // The client's own line first, the proxy's appended after it: the
        // proxy's entry names the client, as it does for sign-ins.
        let mut req = format!("ws://{}/machines/{id}/terminal?cols=80&rows=24", env.addr).into_client_request().unwrap();
        req.headers_mut().insert("Cookie", alice.parse().unwrap());
        req.headers_mut().insert("Origin", format!("http://{}", env.addr).parse().unwrap());
        req.headers_mut().append("X-Forwarded-For", "10.9.9.9".parse().unwrap());
        req.headers_mut().append("X-Forwarded-For", "198.51.100.7".parse().unwrap());
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("the owner connects");
        read_until(&mut ws, "# ").await;
        let open = sessions::list_open(&env.pool).await.unwrap();
        assert_eq!(open.len(), 1);
        assert!(open[0].client_addr.starts_with("198.51.100.7"), "recorded from {:?}, not the proxy's client", open[0].client_addr);
        let detail: String = sqlx::query_scalar("SELECT detail FROM audit_log WHERE action = 'terminal.open'").fetch_one(&env.pool).await.unwrap();
        assert!(detail.contains("opened from 198.51.100.7") && !detail.contains("127.0.0.1") && !detail.contains("10.9.9.9"), "{detail}");
        ws.close(None).await.unwrap();
        close_frame(&mut ws).await;
        env.operate(id, TaskKind::Delete).await;
    }
}

/// Like `connect`, but a refusal comes with the response's text.
async fn try_connect(env: &Env, cookie: &str, machine_id: i64) -> Result<Ws, (StatusCode, String)> {
    let mut req =
        format!("ws://{}/machines/{machine_id}/terminal?cols=80&rows=24", env.addr).into_client_request().unwrap();
    req.headers_mut().insert("Cookie", cookie.parse().unwrap());
    req.headers_mut().insert("Origin", format!("http://{}", env.addr).parse().unwrap());
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::Error::Http(res)) => {
            let text = res.body().as_deref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
            Err((StatusCode::from_u16(res.status().as_u16()).unwrap(), text))
        }
        Err(e) => panic!("unexpected WebSocket error: {e}"),
    }
}

gantry_testkit::timed_test! {
    async fn the_terminal_limit_holds_against_parallel_upgrades() {
        let env = env(Limits { max_terminals: 2, ..Limits::default() }).await;
        let (id, container) = env.machine(&env.alice.clone(), "term-cap").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;

        // Ten upgrades at once: the check and the registration used to be
        // apart (the shell's start in between), so all ten got through.
        let tries = futures_util::future::join_all((0..10).map(|_| try_connect(&env, &alice, id))).await;
        let mut open = Vec::new();
        for t in tries {
            match t {
                Ok(ws) => open.push(ws),
                Err((status, text)) => {
                    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
                    assert!(text.contains("2 terminals open, its limit"), "{text}");
                }
            }
        }
        assert_eq!(open.len(), 2, "exactly the limit's worth of terminals open");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM terminal_sessions").await, 2, "no session for the refused");
        // No shell was started for the refused ones.
        let (_, ps) = env.engine().await.exec(&container, &["ps", "-o", "pid,args"]).await.unwrap();
        assert_eq!(ps.lines().filter(|l| l.trim_end().ends_with("/bin/sh")).count(), 2, "{ps}");

        // A closed terminal gives its slot back.
        let mut ws = open.pop().unwrap();
        ws.close(None).await.unwrap();
        close_frame(&mut ws).await;
        let mut ws = try_connect(&env, &alice, id).await.expect("the freed slot is taken");
        read_until(&mut ws, "# ").await;
        assert!(try_connect(&env, &alice, id).await.is_err(), "full again");
        for mut ws in open.into_iter().chain([ws]) {
            ws.close(None).await.unwrap();
            close_frame(&mut ws).await;
        }
        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn one_user_cannot_hold_every_terminal() {
        let env = env(Limits { max_terminals_per_user: 1, ..Limits::default() }).await;
        let (id, _container) = env.machine(&env.alice.clone(), "term-per-user").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let mut first = try_connect(&env, &alice, id).await.expect("alice's first terminal");
        read_until(&mut first, "# ").await;
        let (status, text) = try_connect(&env, &alice, id).await.expect_err("alice's second terminal is refused");
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
        assert!(text.contains("1 terminals open on this server, the limit per user"), "{text}");
        // The page's preflight says so too, rather than "ready" (before, it
        // skipped the limits and the page could only say the connection was lost).
        let res = http().get(env.url(&format!("/machines/{id}/terminal"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(res.text().await.unwrap().contains("the limit per user"));
        // Another user still gets one (the admin, on alice's machine).
        let admin = sign_in(&env, "admin", ADMIN_PASSWORD).await;
        let mut other = try_connect(&env, &admin, id).await.expect("another user's terminal opens");
        read_until(&mut other, "# ").await;
        // Closing gives alice's slot back.
        first.close(None).await.unwrap();
        close_frame(&mut first).await;
        let mut again = try_connect(&env, &alice, id).await.expect("alice opens one again");
        read_until(&mut again, "# ").await;
        for mut ws in [other, again] {
            ws.close(None).await.unwrap();
            close_frame(&mut ws).await;
        }
        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn deleting_the_machine_closes_its_terminal_with_a_reason() {
        let env = env(Limits::default()).await;
        let (id, _container) = env.machine(&env.alice.clone(), "term-del").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let mut ws = connect(&env, Some(&alice), None, id).await.unwrap();
        read_until(&mut ws, "# ").await;
        let (closed, ()) = tokio::join!(close_frame(&mut ws), env.operate(id, TaskKind::Delete));
        assert_eq!(closed.0, close_code::MACHINE_DELETED, "{closed:?}");
        assert!(closed.1.contains("term-del was deleted"), "{closed:?}");
        let reason: String = sqlx::query_scalar("SELECT close_reason FROM terminal_sessions").fetch_one(&env.pool).await.unwrap();
        assert!(reason.contains("deleted"), "{reason}");
        // A deleted machine takes no new terminal.
        assert_eq!(connect(&env, Some(&alice), None, id).await.err(), Some(StatusCode::CONFLICT));
    }
}

gantry_testkit::timed_test! {
    async fn restarting_closes_the_terminal_and_it_reconnects_once_running() {
        let env = env(Limits::default()).await;
        let (id, _container) = env.machine(&env.alice.clone(), "term-rs").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let mut ws = connect(&env, Some(&alice), None, id).await.unwrap();
        read_until(&mut ws, "# ").await;
        let (closed, ()) = tokio::join!(close_frame(&mut ws), env.operate(id, TaskKind::Restart));
        assert_eq!(closed.0, close_code::MACHINE_STOPPED, "{closed:?}");
        assert!(closed.1.contains("restarting"), "{closed:?}");
        let mut ws = connect(&env, Some(&alice), None, id).await.expect("reconnects after the restart");
        type_line(&mut ws, "echo again-$((1+1))").await;
        read_until(&mut ws, "again-2").await;
        ws.close(None).await.unwrap();
        close_frame(&mut ws).await;
        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn an_admin_closes_a_session_idle_ones_close_and_uploads_have_a_limit() {
        let env = env(Limits { idle_secs: 3, upload_max_bytes: 1024 * 1024, ..Limits::default() }).await;
        let (id, _container) = env.machine(&env.alice.clone(), "term-adm").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;

        let mut ws = connect(&env, Some(&alice), None, id).await.unwrap();
        read_until(&mut ws, "# ").await;
        let open = sessions::list_open(&env.pool).await.unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].user, "alice");
        // The admin console's server functions: the list, and "close" —
        // which only an administrator may use.
        let call = |cookie: String, endpoint: &'static str, form: Vec<(&'static str, String)>| {
            http()
                .post(env.url(&format!("/api/{endpoint}")))
                .header("Cookie", cookie)
                .header("Origin", format!("http://{}", env.addr))
                .form(&form)
                .send()
        };
        let admin = sign_in(&env, "admin", ADMIN_PASSWORD).await;
        let listed: serde_json::Value = call(admin.clone(), "terminal_sessions", vec![]).await.unwrap().json().await.unwrap();
        assert_eq!(listed["open"][0]["user"], "alice", "{listed}");
        let res = call(alice.clone(), "close_terminal", vec![("session_id", open[0].id.to_string())]).await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "a user cannot close sessions");
        let res = call(admin.clone(), "close_terminal", vec![("session_id", open[0].id.to_string())]).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let (code, reason) = close_frame(&mut ws).await;
        assert_eq!(code, close_code::CLOSED_BY_ADMIN);
        assert!(reason.contains("administrator admin"), "{reason}");

        // Nothing typed, nothing printed: closed after the idle limit.
        let mut ws = connect(&env, Some(&alice), None, id).await.unwrap();
        let (code, reason) = close_frame(&mut ws).await;
        assert_eq!(code, close_code::IDLE, "{reason}");

        // Beyond the upload limit: refused before any byte is stored.
        let res = http()
            .put(env.url(&format!("/machines/{id}/files?path=big.bin")))
            .header("Cookie", &alice)
            .body(vec![7u8; 2 * 1024 * 1024])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let res = http().get(env.url(&format!("/machines/{id}/files?path=big.bin"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        env.operate(id, TaskKind::Delete).await;
    }
}

/// Deterministic bytes that do not compress.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E3779B97F4A7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

gantry_testkit::timed_test! {
    async fn a_terminal_closes_when_its_account_is_disabled_or_demoted() {
        let env = env(Limits::default()).await;
        let (id, _container) = env.machine(&env.alice.clone(), "term-acct").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let mut ws = connect(&env, Some(&alice), None, id).await.unwrap();
        read_until(&mut ws, "# ").await;
        let mut logs = http().get(env.url(&format!("/machines/{id}/logs?follow=1&tail=0"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(logs.status(), StatusCode::OK);
        // Disabled while typing into a shell and following the logs: both
        // end with the account's sessions, saying why.
        let (closed, disabled) = tokio::join!(close_frame(&mut ws), accounts::set_disabled(&env.pool, env.admin.id, env.alice.id, true));
        disabled.unwrap();
        assert_eq!(closed.0, close_code::ACCOUNT_CHANGED, "{closed:?}");
        assert!(closed.1.contains("sign in again"), "{closed:?}");
        let end = next_event(&mut logs, &mut String::new()).await.expect("an end event");
        assert!(end.contains("your account was changed"), "{end}");
        // The old cookie opens nothing (the page guard sends it to sign in).
        assert_eq!(connect(&env, Some(&alice), None, id).await.err(), Some(StatusCode::SEE_OTHER));

        // An admin's shell on another user's machine ends when demoted.
        let dora = accounts::create_user(&env.pool, None, NewUser { username: "dora", password: PASSWORD, role: Role::Admin, group: Some("other") }).await.unwrap();
        let dora_cookie = sign_in(&env, "dora", PASSWORD).await;
        let mut ws = connect(&env, Some(&dora_cookie), None, id).await.unwrap();
        read_until(&mut ws, "# ").await;
        let (closed, demoted) = tokio::join!(close_frame(&mut ws), accounts::set_role(&env.pool, env.admin.id, dora.id, Role::User));
        demoted.unwrap();
        assert_eq!(closed.0, close_code::ACCOUNT_CHANGED, "{closed:?}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM terminal_sessions WHERE closed_at IS NULL").await, 0);
        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn files_go_in_and_out_of_the_volume_and_stay_inside_it() {
        let env = env(Limits::default()).await;
        let (id, container) = env.machine(&env.alice.clone(), "files-1").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let files = |q: &str| env.url(&format!("/machines/{id}/files{q}"));

        // 50 MB up and down, byte for byte.
        let data = noise(50 * 1024 * 1024);
        let sent = Sha256::digest(&data);
        let res = http().put(files("?path=up/big.bin")).header("Cookie", &alice).body(data).send().await.unwrap();
        let status = res.status();
        assert_eq!(status, StatusCode::OK, "{}", res.text().await.unwrap());
        let res = http().get(files("?path=/data/up/big.bin")).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.content_length(), Some(50 * 1024 * 1024));
        let mut hasher = Sha256::new();
        let mut res = res;
        while let Some(chunk) = res.chunk().await.unwrap() {
            hasher.update(&chunk);
        }
        assert_eq!(hasher.finalize(), sent, "the downloaded file has the uploaded SHA-256");
        let (code, out) = env.engine().await.exec(&container, &["ls", "-l", "/data/up"]).await.unwrap();
        assert!(code == 0 && out.contains("52428800") && out.contains("big.bin"), "{out}");

        // Outside the volume, or through a link out of it: refused.
        for bad in ["../../etc/passwd", "/etc/passwd", "up/../../etc/passwd"] {
            let res = http().get(files(&format!("?path={bad}"))).header("Cookie", &alice).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "download {bad}");
            let res = http().put(files(&format!("?path={bad}"))).header("Cookie", &alice).body("x").send().await.unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "upload {bad}");
        }
        env.engine().await.exec(&container, &["ln", "-s", "/etc", "/data/etc-link"]).await.unwrap();
        let res = http().put(files("?path=etc-link/passwd")).header("Cookie", &alice).body("root::0:0::/:/bin/sh\n").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "a link on the way is refused");
        let res = http().get(files("?path=etc-link/passwd")).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        let (_, passwd) = env.engine().await.exec(&container, &["cat", "/etc/passwd"]).await.unwrap();
        assert!(passwd.starts_with("root:x:0:0"), "the container's /etc/passwd is untouched: {passwd}");

        // Missing: 404.
        let res = http().get(files("?path=nothing/here.txt")).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);

        // The machine page's form, without JavaScript: multipart, then a
        // redirect back that says what was stored.
        let boundary = "gantry-test-boundary";
        let form = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"dir\"\r\n\r\nforms\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"hello.txt\"\r\nContent-Type: text/plain\r\n\r\nhello from a form\n\r\n--{boundary}--\r\n"
        );
        let res = http()
            .post(files(""))
            .header("Cookie", &alice)
            .header("Origin", format!("http://{}", env.addr))
            .header("Accept", "text/html")
            .header("Content-Type", format!("multipart/form-data; boundary={boundary}"))
            .body(form)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        let location = res.headers()["location"].to_str().unwrap().to_string();
        // The server's own message, kept in the session (never in the URL).
        assert_eq!(location, format!("/machines/{id}#files"));
        let page = http().get(env.url(location.split('#').next().unwrap())).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
        assert!(page.text().await.unwrap().contains("/data/forms/hello.txt"));
        let res = http().get(files("?path=forms/hello.txt")).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "hello from a form\n");
        // A folder field longer than any path is refused once it is (it is
        // no longer read whole into memory first, whatever its size).
        let long = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"dir\"\r\n\r\n{}\r\n--{boundary}--\r\n",
            "d".repeat(5000)
        );
        let res = http()
            .post(files(""))
            .header("Cookie", &alice)
            .header("Origin", format!("http://{}", env.addr))
            .header("Content-Type", format!("multipart/form-data; boundary={boundary}"))
            .body(long)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert!(res.text().await.unwrap().contains("the folder is longer than 4096 bytes"));
        // A body whose framing never comes (no boundary in 200 KiB, or a
        // part's headers that never end) is cut once past the guard's
        // limit, not buffered whole by the multipart parser.
        let form_headers = format!(
            "Cookie: {alice}\r\nOrigin: http://{}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n",
            env.addr
        );
        let zeros = vec![0u8; 200 * 1024];
        let (status, text) = raw_post(env.addr, &format!("/machines/{id}/files"), &form_headers, &zeros).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("more than 65536 bytes before the form's first boundary"), "{text}");
        let mut endless = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.bin\"\r\nX: ").into_bytes();
        endless.resize(200 * 1024, b'h');
        let (status, text) = raw_post(env.addr, &format!("/machines/{id}/files"), &form_headers, &endless).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("a part's headers are longer than 65536 bytes"), "{text}");
        // A folder comes as a tar archive.
        let res = http().get(files("?path=forms")).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.headers()["content-type"], "application/x-tar");

        // Group members and other groups cannot reach the files.
        let bob = sign_in(&env, "bob", PASSWORD).await;
        let res = http().get(files("?path=forms/hello.txt")).header("Cookie", &bob).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        let carol = sign_in(&env, "carol", PASSWORD).await;
        let res = http().put(files("?path=x.txt")).header("Cookie", &carol).body("x").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        env.operate(id, TaskKind::Delete).await;
    }
}

/// The machine page's data (`/api/workspace_info`) as `cookie`'s user sees it.
async fn workspace_info(env: &Env, cookie: &str, id: i64) -> serde_json::Value {
    let res = http()
        .post(env.url("/api/workspace_info"))
        .header("Cookie", cookie)
        .header("Origin", format!("http://{}", env.addr))
        .form(&[("machine_id", id.to_string())])
        .send()
        .await
        .unwrap();
    res.json().await.unwrap()
}

/// `POST path` over a bare connection (the server may answer before the
/// body is all sent, and close): the status and the whole answer.
async fn raw_post(addr: SocketAddr, path: &str, headers: &str, body: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    // A write cut short: the server answered early and closed.
    let _ = sock.write_all(body).await;
    let mut answer = Vec::new();
    let _ = sock.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer)
}

/// The `data:` lines of a Server-Sent Events body, as they arrive.
pub(crate) async fn next_event(body: &mut reqwest::Response, buf: &mut String) -> Option<String> {
    loop {
        if let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let data: Vec<&str> =
                event.lines().filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:"))).collect();
            if !data.is_empty() {
                return Some(data.join("\n"));
            }
            continue;
        }
        let chunk = body.chunk().await.unwrap()?;
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
}

gantry_testkit::timed_test! {
    async fn logs_stream_in_order_and_the_last_lines_render_without_javascript() {
        let env = env(Limits::default()).await;
        let (id, container) = env.machine(&env.alice.clone(), "logs-1").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;

        // Follow first (only new lines). The answer's head comes before the
        // engine has the follower (its stream starts when first read), so
        // the container says "ready" until a "ready" has come through, and
        // only then prints a line every 100 ms.
        let res = http().get(env.url(&format!("/machines/{id}/logs?follow=1&tail=0"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        let mut body = res;
        let script = "(while [ ! -e /tmp/go ]; do echo ready; sleep 0.1; done; i=0; while [ $i -lt 40 ]; do echo line-$i; i=$((i+1)); sleep 0.1; done) >/proc/1/fd/1 2>&1 &";
        let (code, out) = env.engine().await.exec(&container, &["/bin/sh", "-c", script]).await.unwrap();
        assert_eq!(code, 0, "{out}");
        let mut buf = String::new();
        assert_eq!(next_event(&mut body, &mut buf).await.as_deref(), Some("ready"), "the follower is in place");
        env.engine().await.exec(&container, &["touch", "/tmp/go"]).await.unwrap();
        let mut first = next_event(&mut body, &mut buf).await;
        while first.as_deref() == Some("ready") {
            first = next_event(&mut body, &mut buf).await;
        }
        assert_eq!(first.as_deref(), Some("line-0"), "no line is lost once the stream follows");
        for i in 1..40 {
            let line = next_event(&mut body, &mut buf).await.expect("the log stream goes on");
            assert_eq!(line, format!("line-{i}"), "lines arrive in order");
        }
        drop(body);

        // The last lines as plain text, and in the machine page's data.
        let res = http().get(env.url(&format!("/machines/{id}/logs?tail=3"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "line-37\nline-38\nline-39\n");
        let info = workspace_info(&env, &alice, id).await;
        assert_eq!(info["allowed"], true);
        assert!(info["log_tail"].as_str().unwrap().ends_with("line-39\n"), "{info}");
        let page = http().get(env.url(&format!("/machines/{id}"))).header("Cookie", &alice).send().await.unwrap().text().await.unwrap();
        assert!(page.contains("line-39") && page.contains("data-gantry-terminal"), "the page renders the log tail and the terminal panel");

        // A group member sees the machine but not inside it.
        let bob = sign_in(&env, "bob", PASSWORD).await;
        let res = http().get(env.url(&format!("/machines/{id}/logs"))).header("Cookie", &bob).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        let info = workspace_info(&env, &bob, id).await;
        assert_eq!(info["allowed"], false, "{info}");
        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn the_machine_page_does_not_name_an_unreachable_engine() {
        let env = env(Limits::default()).await;
        let (id, _container) = env.machine(&env.alice.clone(), "gone-engine").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        // The node's engine stops answering (nothing listens on port 1).
        let real = env.dispatcher.fleet.executor(&env.pool, env.node_id).await.unwrap();
        let dead = gantry_platform::fleet::executor_for("docker", "tcp://127.0.0.1:1", "").unwrap();
        env.dispatcher.fleet.insert(env.node_id, dead);
        let info = workspace_info(&env, &alice, id).await;
        let tail = info["log_tail"].as_str().unwrap_or_default();
        assert!(tail.contains("cannot be read now") && tail.contains("logged"), "{info}");
        assert!(!tail.contains("127.0.0.1") && !tail.contains("tcp://"), "the engine's address reached the page: {tail}");
        env.dispatcher.fleet.insert(env.node_id, real);
        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn followed_logs_have_the_terminals_limits() {
        let env = env(Limits { max_terminals_per_user: 1, ..Limits::default() }).await;
        let (id, container) = env.machine(&env.alice.clone(), "logs-cap").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let follow = |cookie: String| {
            let url = env.url(&format!("/machines/{id}/logs?follow=1&tail=0"));
            async move { http().get(url).header("Cookie", cookie).send().await.unwrap() }
        };
        let first = follow(alice.clone()).await;
        assert_eq!(first.status(), StatusCode::OK);
        // Each follow holds an engine connection and an account watcher for
        // as long as the container runs: one user may not open any number.
        let second = follow(alice.clone()).await;
        assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(second.text().await.unwrap().contains("you have 1 followed or whole logs open on this server, the limit per user"));
        // A short plain tail and other users are not limited by it …
        let res = http().get(env.url(&format!("/machines/{id}/logs?tail=3"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        // … unless its 200 lines are megabytes, which a slow reader would
        // keep an engine connection for: beyond 256 KiB it takes a place.
        let script = "i=0; while [ $i -lt 200 ]; do head -c 16000 /dev/zero | tr '\\0' x; echo; i=$((i+1)); done >/proc/1/fd/1; echo logs-cap-done >/proc/1/fd/1";
        let (code, out) = env.engine().await.exec(&container, &["/bin/sh", "-c", script]).await.unwrap();
        assert_eq!(code, 0, "{out}");
        // The engine copies the output on its own time: the marker says it has.
        let mut last = String::new();
        for _ in 0..100 {
            last = http().get(env.url(&format!("/machines/{id}/logs?tail=1"))).header("Cookie", &alice).send().await.unwrap().text().await.unwrap();
            if last.contains("logs-cap-done") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(last, "logs-cap-done\n");
        let res = http().get(env.url(&format!("/machines/{id}/logs?tail=200"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "200 lines of 16 kB hold the engine while read");
        let res = http().get(env.url(&format!("/machines/{id}/logs?tail=3"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.text().await.unwrap().len(), 2 * 16001 + "logs-cap-done\n".len(), "read whole into memory");
        // … a whole or long one is: it holds its engine connection for as
        // long as the client takes to read it.
        for long in ["all", "100000"] {
            let res = http().get(env.url(&format!("/machines/{id}/logs?tail={long}"))).header("Cookie", &alice).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "tail={long}");
        }
        let admin = sign_in(&env, "admin", ADMIN_PASSWORD).await;
        assert_eq!(follow(admin).await.status(), StatusCode::OK);
        drop(first);
        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_terminal_closes_when_its_machine_is_queued_for_an_idle_reclaim_and_none_opens_meanwhile() {
        // The machine row stays `running` through a reclaim; its container
        // is about to be saved and removed, so typing on would be lost.
        let env = env(Limits::default()).await;
        let (id, _container) = env.machine(&env.alice.clone(), "term-reclaim").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let mut ws = connect(&env, Some(&alice), None, id).await.unwrap();
        read_until(&mut ws, "# ").await;
        let now = gantry_platform::now();
        assert!(gantry_platform::transitions::reclaim::warn(&env.pool, id, now - 1, "idle").await.unwrap());
        let task = gantry_platform::transitions::reclaim::queue(&env.pool, id, now, None, "idle reclaim").await.unwrap().expect("queued");
        let (code, reason) = close_frame(&mut ws).await;
        assert_eq!(code, close_code::MACHINE_STOPPED, "{reason}");
        assert!(reason.contains("being reclaimed"), "{reason}");
        let recorded: String = sqlx::query_scalar("SELECT close_reason FROM terminal_sessions WHERE machine_id = ?").bind(id).fetch_one(&env.pool).await.unwrap();
        assert!(recorded.contains("being reclaimed"), "{recorded}");
        assert_eq!(connect(&env, Some(&alice), None, id).await.err(), Some(StatusCode::CONFLICT), "no terminal opens while the reclaim waits");

        // Called off (the owner extends it): the terminal opens again.
        sqlx::query("UPDATE tasks SET state = 'cancelled' WHERE id = ?").bind(task).execute(&env.pool).await.unwrap();
        let mut ws = connect(&env, Some(&alice), None, id).await.unwrap();
        read_until(&mut ws, "# ").await;
    }
}
