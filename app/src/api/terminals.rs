//! Working inside a machine (terminal, logs, files): what the machine page
//! needs to render those panels, and the admin's list of terminal sessions
//! with "close". The terminal itself, the log stream and file transfers
//! are plain HTTP/WebSocket routes of the server (`server/src/workspace.rs`).

use crate::error::AppError;
use gantry_platform::workspace::sessions::SessionView;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The machine page's terminal/logs/files panels, as the signed-in user
/// may see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceInfo {
    pub machine: String,
    /// Owner or admin; group members see the machine but cannot enter it.
    pub allowed: bool,
    /// Why not (when not allowed), or why the panels cannot work here.
    pub note: String,
    /// The machine's node runs Docker (the simulated executor cannot).
    pub docker: bool,
    /// The last lines of the container's output, when there is a container.
    pub log_tail: Option<String>,
    pub log_tail_lines: u64,
    pub upload_max_mb: u64,
    pub idle_minutes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSessions {
    pub open: Vec<SessionView>,
    pub closed: Vec<SessionView>,
    /// The server's clock, for "open for".
    pub now: i64,
}

/// Longest log tail rendered into the page.
const LOG_TAIL_BYTES: usize = 256 * 1024;

#[server(name = GetWorkspaceInfo, prefix = "/api", endpoint = "workspace_info")]
pub async fn workspace_info(machine_id: i64) -> Result<WorkspaceInfo, AppError> {
    use gantry_platform::workspace::{self, Refusal, LOG_TAIL_LINES};
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    let limits = use_context::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<workspace::Limits>().copied())
        .unwrap_or_default();
    let mut info = WorkspaceInfo {
        machine: String::new(),
        allowed: false,
        note: String::new(),
        docker: false,
        log_tail: None,
        log_tail_lines: LOG_TAIL_LINES,
        upload_max_mb: limits.upload_max_bytes / (1024 * 1024),
        idle_minutes: limits.idle_secs.div_ceil(60),
    };
    let target = match workspace::target(&pool, &user, machine_id).await? {
        Ok(t) => t,
        // Not this page's business to set the status: the machine's own
        // panel already says "not found".
        Err(Refusal::NotFound) => return Err(AppError::NotFound("machine not found".into())),
        Err(r @ Refusal::NotOwner(_)) => {
            info.note = r.to_string();
            return Ok(info);
        }
        Err(r) => return Err(AppError::Conflict(r.to_string())),
    };
    info.machine = target.name.clone();
    info.allowed = true;
    let Some(node) = target.node_id else {
        info.note = format!("machine {} has no node yet", target.name);
        return Ok(info);
    };
    let exec = crate::state::fleet()?.executor(&pool, node).await.map_err(|e| {
        // A node whose engine cannot be set up says why in the log only:
        // the reason names its endpoint.
        tracing::warn!(node, error = %e, "no executor for a machine's node");
        AppError::Conflict("the machine's node cannot be reached now (the error has been logged)".into())
    })?;
    info.docker = !exec.is_simulated();
    if !info.docker {
        info.note = "Terminals, logs and files need a Docker node; this machine runs on the simulated executor.".into();
        return Ok(info);
    }
    if let Ok((container, _)) = target.require_container() {
        info.log_tail = Some(log_tail(&exec, container).await);
    }
    Ok(info)
}

async fn log_tail(exec: &gantry_platform::executor::Executor, container: &str) -> String {
    use gantry_platform::{executor::inside::read_up_to, workspace::LOG_TAIL_LINES};
    let read = async {
        let stream = exec.logs(container, Some(LOG_TAIL_LINES), false).await?;
        let bytes = read_up_to(stream, LOG_TAIL_BYTES).await?;
        Ok::<_, gantry_platform::executor::ExecError>(String::from_utf8_lossy(&bytes).replace('\r', ""))
    };
    match tokio::time::timeout(std::time::Duration::from_secs(5), read).await {
        Ok(Ok(text)) => text,
        // The engine's own text names its address and host paths: logged
        // only (as the workspace routes' `exec_error` does).
        Ok(Err(gantry_platform::executor::ExecError::NotFound(_))) => {
            "(the machine's container is not there)".to_string()
        }
        Ok(Err(e)) => {
            tracing::warn!(container, error = %e, "could not read a machine's logs for its page");
            "(the logs cannot be read now: the machine's node does not answer; the error has been logged)".to_string()
        }
        Err(_) => "(the engine did not send the logs in time)".to_string(),
    }
}

#[server(name = ListTerminalSessions, prefix = "/api", endpoint = "terminal_sessions")]
pub async fn terminal_sessions() -> Result<TerminalSessions, AppError> {
    use gantry_platform::workspace::sessions;
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    Ok(TerminalSessions {
        open: sessions::list_open(&pool).await?,
        closed: sessions::list_closed(&pool, 50).await?,
        now: gantry_platform::now(),
    })
}

/// Asks the server holding the session to close it (within seconds).
#[server(prefix = "/api", endpoint = "close_terminal")]
pub async fn close_terminal(session_id: i64) -> Result<i64, AppError> {
    let admin = crate::state::require_admin()?;
    gantry_platform::workspace::sessions::request_close(&crate::state::pool()?, &admin, session_id).await?;
    Ok(session_id)
}
