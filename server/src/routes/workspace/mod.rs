//! Routes for working inside a dev machine, beside the Leptos app:
//!
//! | route | what |
//! |---|---|
//! | `GET /machines/{id}/terminal` | WebSocket: an interactive shell on a TTY (see `terminal.rs`); without the upgrade headers, a preflight that says whether a terminal can open (200) or why not |
//! | `GET /machines/{id}/logs?tail=N\|all&follow=1` | the container's stdout/stderr: plain text, or Server-Sent Events that follow |
//! | `GET /machines/{id}/files?path=P` | download a file from the volume (a directory comes as a tar) |
//! | `PUT /machines/{id}/files?path=P` | upload one file (the body; Content-Length required) |
//! | `POST /machines/{id}/files` | upload from a form (multipart: `dir`, then `file`) |
//! | `GET /vendor/{file}` | xterm.js, its CSS and fit add-on, and Gantry's terminal glue, served from the binary |
//!
//! Every machine route needs a session (the same cookie as the pages), the
//! machine's owner or an admin (`gantry_platform::workspace`), and passes
//! the same Origin rule as state-changing requests — for the WebSocket
//! upgrade too, which is a GET. What a route keeps open (a terminal, a
//! followed log, a transfer) ends with the session that opened it
//! ([`SessionWatch`]).

mod session_watch;

pub use session_watch::{Ended, SessionWatch, Watched};

use super::{files, logs, terminal};
use crate::{http::guard::OriginRule, vendor};
use app::state::{AppState, RequestUser};
use axum::{
    extract::DefaultBodyLimit,
    http::{request::Parts, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use clap::Args;
use gantry_platform::{
    accounts::User,
    executor::{ExecError, Executor},
    workspace::{self, sessions::Registry, Limits, Refusal, Target},
};

/// Settings of the terminal, logs and files routes.
#[derive(Debug, Clone, Args)]
pub struct WorkspaceArgs {
    /// Close a browser terminal after this many seconds with nothing typed or printed.
    #[arg(long, env = "GANTRY_TERMINAL_IDLE_SECS", default_value_t = 1800)]
    pub terminal_idle_secs: u64,
    /// Open browser terminals one server process accepts at a time.
    #[arg(long, env = "GANTRY_TERMINAL_MAX", default_value_t = 256)]
    pub terminal_max: usize,
    /// Of those, browser terminals one user may hold open at a time.
    #[arg(long, env = "GANTRY_TERMINAL_MAX_PER_USER", default_value_t = 8)]
    pub terminal_max_per_user: usize,
    /// Largest file that can be uploaded into a machine's volume, in MiB.
    #[arg(long, env = "GANTRY_UPLOAD_MAX_MB", default_value_t = 1024)]
    pub upload_max_mb: u64,
}

impl WorkspaceArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            upload_max_bytes: self.upload_max_mb.saturating_mul(1024 * 1024),
            idle_secs: self.terminal_idle_secs.max(1),
            max_terminals: self.terminal_max,
            max_terminals_per_user: self.terminal_max_per_user,
        }
    }
}

#[derive(Clone)]
pub struct WsState {
    pub app: AppState,
    pub limits: Limits,
    /// Who counts as this site (the terminal's upgrade checks it).
    pub origin: OriginRule,
    /// The terminal sessions this process holds.
    pub terminals: Registry,
    /// Terminal slots taken (opening or open), against the limits.
    pub terminal_slots: terminal::Slots,
    /// Followed logs open, counted apart against the same limits: each
    /// holds a connection to the engine and a place in the session watch.
    pub follow_slots: terminal::Slots,
    /// Form uploads being spooled to a temporary file (see `files`).
    pub spool_slots: terminal::Slots,
    /// Ends terminals, followed logs and transfers with their session.
    pub session_watch: SessionWatch,
    /// True once the process is asked to stop: followed logs and terminals
    /// end then (with a reason), or the graceful shutdown would wait on
    /// them for ever.
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

impl WsState {
    /// Resolves when the process is asked to stop.
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.stopping.clone();
        async move {
            let _ = rx.wait_for(|stopping| *stopping).await;
        }
    }
}

/// The routes, merged into the main router before its layers (sessions,
/// the signed-in user, tracing) so they get the same treatment.
pub fn routes(app: AppState, limits: Limits, origin: OriginRule, session_watch: SessionWatch) -> Router<AppState> {
    let terminals = Registry::start(app.pool.clone());
    let (stop, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop_signal().await;
        let _ = stop.send(true);
    });
    let state = WsState {
        app,
        limits,
        origin,
        terminals,
        terminal_slots: terminal::Slots::default(),
        follow_slots: terminal::Slots::default(),
        spool_slots: terminal::Slots::default(),
        session_watch,
        stopping,
    };
    Router::new()
        .route("/machines/{id}/terminal", get(terminal::terminal))
        .route("/machines/{id}/logs", get(logs::logs))
        .route(
            "/machines/{id}/files",
            get(files::download).put(files::upload_body).post(files::upload_form).layer(DefaultBodyLimit::disable()),
        )
        .route("/vendor/{file}", get(vendor::serve))
        .with_state(state)
}

/// Ctrl-C or SIGTERM: the same signals `router::serve` shuts down on.
async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

pub fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    (status, [(axum::http::header::CACHE_CONTROL, "no-store")], message.into()).into_response()
}

pub fn refusal(r: Refusal) -> Response {
    let status = match r {
        Refusal::NotFound => StatusCode::NOT_FOUND,
        Refusal::NotOwner(_) => StatusCode::FORBIDDEN,
        Refusal::State(_) => StatusCode::CONFLICT,
    };
    refuse(status, r.to_string())
}

/// An engine's error as the machine's owner reads it. An unreachable
/// engine's text names its endpoint (an address inside the cluster) and
/// the connection's innards: that goes to the log only.
pub fn exec_error(e: ExecError) -> Response {
    let status = match e {
        ExecError::NotFound(_) => StatusCode::NOT_FOUND,
        ExecError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        ExecError::ImageMissing(_) | ExecError::Failed(_) => StatusCode::BAD_GATEWAY,
    };
    if let ExecError::Unavailable(detail) = &e {
        tracing::warn!(error = %detail, "a machine's engine is unavailable");
        return refuse(
            status,
            "the machine's node does not answer now; try again in a moment (the error has been logged)",
        );
    }
    // The engine mounts a stopped container's volumes for each archive
    // call; its mount error names host paths and devices: logged only.
    if let ExecError::Failed(detail) = &e {
        if is_mount_failure(detail) {
            tracing::error!(error = %detail, "the engine could not mount a machine's volume");
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the machine's data volume could not be mounted on its node; nothing was read or written (the error has been logged)",
            );
        }
    }
    refuse(status, e.to_string())
}

/// Docker's texts for a volume it could not mount ("failed to mount local
/// volume: mount /dev/loop9:/var/lib/docker/volumes/...").
fn is_mount_failure(detail: &str) -> bool {
    ["failed to mount local volume", "error while mounting volume"].iter().any(|p| detail.contains(p))
}

pub fn internal(e: impl std::fmt::Display) -> Response {
    tracing::error!(error = %e, "workspace request failed");
    refuse(StatusCode::INTERNAL_SERVER_ERROR, "something went wrong on the server; the error has been logged")
}

/// The signed-in user and the machine they may enter, or the response
/// that refuses them. `check_origin`: for requests the same-origin layer
/// does not cover (GETs that do something: the WebSocket upgrade).
pub async fn enter(
    st: &WsState,
    parts: &Parts,
    machine_id: i64,
    check_origin: bool,
) -> Result<(User, Target), Response> {
    if check_origin && !st.origin.allows(&parts.headers) {
        return Err(refuse(StatusCode::FORBIDDEN, "cross-origin request refused"));
    }
    let user = parts
        .extensions
        .get::<RequestUser>()
        .and_then(|u| u.0.clone())
        .ok_or_else(|| refuse(StatusCode::UNAUTHORIZED, "please sign in"))?;
    match workspace::target(&st.app.pool, &user, machine_id).await {
        Ok(Ok(target)) => Ok((user, target)),
        Ok(Err(r)) => Err(refusal(r)),
        Err(e) => Err(internal(e)),
    }
}

/// The executor of the machine's node; the simulated one cannot do this.
pub async fn executor(st: &WsState, node_id: i64, what: &str) -> Result<Executor, Response> {
    let exec = st.app.fleet.executor(&st.app.pool, node_id).await.map_err(internal)?;
    if exec.is_simulated() {
        return Err(refuse(
            StatusCode::NOT_IMPLEMENTED,
            format!("{what} need a Docker node: this machine runs on the simulated executor, which has no containers"),
        ));
    }
    Ok(exec)
}

/// True when the client asked for HTML (a form post without JavaScript).
pub fn wants_html(parts: &Parts) -> bool {
    parts.headers.get(axum::http::header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html"))
}

#[cfg(test)]
mod tests {
    use super::*;

    gantry_testkit::timed_test! {
        async fn an_unreachable_engine_is_not_named_to_the_user() {
            let res = exec_error(ExecError::Unavailable("Docker Engine at tcp://10.1.2.3:2375 is unreachable: connection refused".into()));
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            let body = axum::body::to_bytes(res.into_body(), 4096).await.unwrap();
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains("does not answer") && !text.contains("10.1.2.3") && !text.contains("tcp://"), "{text}");
        }
    }

    gantry_testkit::timed_test! {
        async fn an_engine_mount_error_names_no_host_path() {
            let detail = "stat /data/x failed (HTTP 500): failed to mount local volume: mount /dev/loop9:/var/lib/docker/volumes/v/_data, flags: 0x0: no such device";
            let res = exec_error(ExecError::Failed(detail.into()));
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            let body = axum::body::to_bytes(res.into_body(), 4096).await.unwrap();
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains("could not be mounted") && !text.contains("/dev/") && !text.contains("/var/lib"), "{text}");
        }
    }
}
