//! The browser terminal: a WebSocket bridged to a shell on a TTY inside the
//! machine's container (Docker exec, attached by the executor).
//!
//! Checked before the upgrade (so a refusal is a plain HTTP status): the
//! session, the Origin, owner-or-admin, the machine running, this
//! server's terminal limits (in all, and per user: a slot is taken under
//! one lock before the shell starts, so parallel upgrades cannot overrun
//! them, and given back when the terminal ends or fails to open), and
//! that the shell started. Without upgrade
//! headers the same checks answer a preflight (200 or the refusal), which
//! the page uses to say why it cannot connect.
//!
//! Protocol: binary frames both ways are terminal bytes; the browser sends
//! `{"resize":{"cols":C,"rows":R}}` as text. The server ends a session
//! with a close frame whose code and reason say why (see
//! `close_code`): the shell exited, the machine
//! stopped/restarts (reconnect when it runs), was deleted, an admin closed
//! it, it was idle too long, or the browser session that opened it ended
//! (signed out in any tab, or unused past the sign-in limit).
//!
//! Memory per session is flat: terminal output is read into one 16 KiB
//! buffer and sent before the next read (a slow browser slows the shell,
//! as a slow ssh client does); input is written through as it arrives;
//! WebSocket buffers are small and messages capped.

mod bridge;
pub mod close_code;
mod resize;
mod session;
mod slots;

pub use slots::{Full, Slot, Slots};

use crate::routes::workspace::{enter, exec_error, executor, internal, refusal, refuse, Watched, WsState};
use app::{api::auth::ClientAddress, error::RequestId};
use axum::{
    extract::{ws::WebSocketUpgrade, ConnectInfo, FromRequestParts, Path, Query, Request, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use gantry_platform::{
    db::Pool,
    executor::{
        inside::{ProcessState, Shell, TtySize},
        ExecError, Executor,
    },
    workspace::sessions,
};
use serde::Deserialize;
use std::{net::SocketAddr, time::Duration};

/// Largest message the browser may send (a paste).
const MAX_MESSAGE: usize = 1 << 20;

#[derive(Debug, Default, Deserialize)]
pub struct TermQuery {
    cols: Option<u16>,
    rows: Option<u16>,
}

pub async fn terminal(
    State(st): State<WsState>,
    Path(id): Path<i64>,
    Query(q): Query<TermQuery>,
    req: Request,
) -> Response {
    let (mut parts, _body) = req.into_parts();
    let (user, target) = match enter(&st, &parts, id, true).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let (container, node) = match target.require_running() {
        Ok((c, n)) => (c.to_string(), n),
        Err(r) => return refusal(r),
    };
    let exec = match executor(&st, node, "terminals").await {
        Ok(e) => e,
        Err(r) => return r,
    };
    // Taken before the shell starts (any early return below gives it back);
    // a preflight takes one too and gives it back at once, so it answers
    // the limits' refusal as the upgrade would, not "ready".
    let slot = match st.terminal_slots.take(user.id, st.limits.max_terminals, st.limits.max_terminals_per_user) {
        Ok(s) => s,
        Err(Full::Server(max)) => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("this server has {max} terminals open, its limit; try again later"),
            )
        }
        Err(Full::User(max)) => {
            return refuse(
                StatusCode::TOO_MANY_REQUESTS,
                format!("you have {max} terminals open on this server, the limit per user; close one to open another"),
            )
        }
    };
    let Ok(upgrade) = WebSocketUpgrade::from_request_parts(&mut parts, &st).await else {
        // A preflight: everything a terminal needs is in place.
        drop(slot);
        return Json(serde_json::json!({ "ready": true, "machine": target.name, "idle_secs": st.limits.idle_secs }))
            .into_response();
    };
    let size = TtySize::new(q.cols.unwrap_or(80), q.rows.unwrap_or(24));
    let shell = match open_shell(st.app.pool.clone(), exec.clone(), container.clone(), size).await {
        Some(Ok(s)) => s,
        Some(Err(e)) => return exec_error(e),
        // Its task was cut off (the server stopping) or panicked (logged).
        None => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the terminal could not be started; try again (the error, if any, has been logged)",
            )
        }
    };
    // No await from here until the guard holds the shell: a request cut off
    // now drops the guard, which hangs the shell up.
    let client = client_label(&parts);
    let pool = st.app.pool.clone();
    let mut guard = Cleanup {
        pool: pool.clone(),
        session: None,
        exec: exec.clone(),
        container: container.clone(),
        exec_id: shell.exec_id.clone(),
        pid: shell.pid,
        done: false,
    };
    // From here on, any early return hangs the shell up (the guard's drop).
    let session = match sessions::open(&pool, &user, id, &target.name, st.terminals.server_id(), &client).await {
        Ok(s) => s,
        Err(e) => return internal(e),
    };
    guard.session = Some(session);
    let registration = st.terminals.register(session);
    tracing::info!(session, machine = %target.name, user = %user.username, "terminal opened");
    let ctx = Ctx {
        pool,
        exec,
        machine_id: id,
        machine: target.name,
        container,
        idle: Duration::from_secs(st.limits.idle_secs),
        request_id: parts.extensions.get::<RequestId>().map(|r| r.0.clone()),
        session: st.session_watch.watch_request(&parts, &user),
    };
    let stopped = st.stopped();
    upgrade
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(256 * 1024)
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        // A failed upgrade drops the closure: `Cleanup` hangs the shell up
        // and closes the session.
        .on_upgrade(move |socket| session::run(socket, shell, guard, registration, slot, ctx, stopped))
}

/// Where the terminal was opened from, for its session row and audit line:
/// the client address the account guard resolved (behind `--trusted-proxy`,
/// the address the proxy forwarded, as sign-ins count it) — with the TCP
/// peer's port when that address is the peer itself.
fn client_label(parts: &axum::http::request::Parts) -> String {
    let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let resolved = parts.extensions.get::<ClientAddress>().and_then(|a| a.0.clone());
    match (resolved, peer) {
        (Some(addr), Some(peer)) if addr == peer.ip().to_string() => peer.to_string(),
        (Some(addr), _) => addr,
        (None, Some(peer)) => peer.to_string(),
        (None, None) => String::new(),
    }
}

/// Starts the shell on a task of its own. Should this request's future be
/// dropped while the engine starts it (hyper keeps an upgrade request
/// running when its client hangs up, but a stopping server aborts its
/// connections), a shell started for nobody would run in the container,
/// unseen, until it stopped: the task hangs it up itself when nobody is
/// left to take it. `None` if the task was cut off (the runtime stopping)
/// or panicked.
async fn open_shell(pool: Pool, exec: Executor, container: String, size: TtySize) -> Option<Result<Shell, ExecError>> {
    let (hand_over, taken) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let opened = exec.open_shell(&container, size).await;
        if let Err(Ok(shell)) = hand_over.send(opened) {
            tracing::info!(%container, "a terminal's client left while its shell started; hanging the shell up");
            cleanup(pool, None, exec, container, shell.exec_id, shell.pid, String::new()).await;
        }
    });
    taken.await.ok()
}

struct Ctx {
    pool: Pool,
    exec: Executor,
    machine_id: i64,
    machine: String,
    container: String,
    idle: Duration,
    /// The upgrade request's id, for the log.
    request_id: Option<String>,
    /// The browser session that opened it: the terminal ends with it.
    session: Watched,
}

/// Hangs the shell up and closes the session row, on every path: at the
/// end of `run`, or when dropped because the upgrade never completed.
struct Cleanup {
    pool: Pool,
    session: Option<i64>,
    exec: Executor,
    container: String,
    exec_id: String,
    pid: Option<u32>,
    done: bool,
}

impl Cleanup {
    async fn finish(&mut self, reason: &str, hang_up: bool) {
        self.done = true;
        cleanup(
            self.pool.clone(),
            self.session,
            self.exec.clone(),
            self.container.clone(),
            self.exec_id.clone(),
            self.pid.filter(|_| hang_up),
            reason.to_string(),
        )
        .await;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let fut = cleanup(
                self.pool.clone(),
                self.session,
                self.exec.clone(),
                self.container.clone(),
                self.exec_id.clone(),
                self.pid,
                "the browser did not complete the WebSocket handshake".to_string(),
            );
            rt.spawn(fut);
        }
    }
}

async fn cleanup(
    pool: Pool,
    session: Option<i64>,
    exec: Executor,
    container: String,
    exec_id: String,
    pid: Option<u32>,
    reason: String,
) {
    if let Some(pid) = pid {
        if let Ok(ProcessState::Running) = exec.shell_state(&exec_id).await {
            if let Err(e) = exec.hangup_shell(&container, pid).await {
                tracing::warn!(error = %e, "could not hang up a terminal's shell");
            }
        }
    }
    if let Some(session) = session {
        if let Err(e) = sessions::close(&pool, session, &reason).await {
            tracing::warn!(error = %e, session, "could not record a terminal's close");
        }
    }
}
