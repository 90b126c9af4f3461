//! A terminal session once the WebSocket is up: bridged until something
//! ends it, then closed in the one order every end shares.

use super::{bridge::bridge, close_code, Cleanup, Ctx};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::{stream::SplitSink, SinkExt, StreamExt};
use gantry_core::task::MachineState;
use gantry_platform::{
    executor::{
        inside::{ProcessState, Shell},
        ContainerStatus, ExecError,
    },
    workspace::{sessions, sessions::Registration, CloseCause, CloseReason, TerminalState},
};
use std::time::Duration;

/// What ended a session, as the bridge saw it.
pub(super) enum End {
    ShellEnded,
    EngineError(ExecError),
    ClientClosed,
    Signal(CloseReason),
    Idle,
}

/// The session from the upgrade to its close frame: whatever ends it, the
/// shell is hung up and the row closed before the browser is told.
pub(super) async fn run(
    socket: WebSocket,
    shell: Shell,
    mut guard: Cleanup,
    mut registration: Registration,
    slot: super::Slot,
    ctx: Ctx,
    stopped: impl std::future::Future<Output = ()>,
) {
    let (mut tx, mut rx) = socket.split();
    let Shell { exec_id, mut output, mut input, .. } = shell;
    let end = bridge(&ctx, &exec_id, &mut output, &mut input, &mut tx, &mut rx, &mut registration, stopped).await;
    let (reason, shell_gone) = close_reason(end, &ctx, &exec_id, guard.session).await;
    tracing::info!(session = ?guard.session, machine = %ctx.machine, code = close_code::of(reason.cause), reason = %reason.text, "terminal closed");
    // Recorded (and the shell hung up) before the browser hears of it, so
    // whoever sees the close frame sees the closed session too.
    // The row is closed before the session leaves the registry: the
    // watcher closes rows of this process that no terminal holds.
    guard.finish(&reason.text, !shell_gone).await;
    drop(registration);
    drop(slot);
    send_close(&mut tx, &reason).await;
}

/// The reason the browser and the session row are given, and whether the
/// shell is gone already (then there is nothing to hang up).
async fn close_reason(end: End, ctx: &Ctx, exec_id: &str, session: Option<i64>) -> (CloseReason, bool) {
    match end {
        End::ShellEnded => (why_ended(ctx, exec_id).await, true),
        End::EngineError(e) => (engine_failure(&e, ctx.request_id.as_deref(), session), false),
        End::ClientClosed => (CloseReason::new(CloseCause::Normal, "closed by the browser"), false),
        End::Signal(reason) => (reason, false),
        End::Idle => (
            CloseReason::new(
                CloseCause::Idle,
                format!(
                    "closed after {} with nothing typed or printed",
                    sessions::duration_text(ctx.idle.as_secs() as i64)
                ),
            ),
            false,
        ),
    }
}

/// Bounded: a browser that stopped reading must not hold the session's
/// task (and its socket) for ever.
async fn send_close(tx: &mut SplitSink<WebSocket, Message>, reason: &CloseReason) {
    let frame = CloseFrame { code: close_code::of(reason.cause), reason: close_text(&reason.text).into() };
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = tx.send(Message::Close(Some(frame))).await;
        let _ = tx.close().await;
    })
    .await;
}

/// The shell's output ended: the machine's row says whether it stopped,
/// restarts or is being deleted (each moves the row before the engine
/// acts); a row still "running" means the container stopped on its own or
/// the shell exited.
async fn why_ended(ctx: &Ctx, exec_id: &str) -> CloseReason {
    let state = gantry_platform::workspace::terminal_state(&ctx.pool, ctx.machine_id).await.ok().flatten();
    match state {
        Some(TerminalState::RUNNING) => {}
        Some(other) => return CloseReason::for_state(&ctx.machine, other),
        None => return CloseReason::for_state(&ctx.machine, TerminalState::Machine(MachineState::Deleted)),
    }
    if let Ok(c) = ctx.exec.inspect_container(&ctx.container).await {
        match c.status {
            ContainerStatus::Running => {}
            ContainerStatus::Missing => {
                return CloseReason::for_state(&ctx.machine, TerminalState::Machine(MachineState::Deleted))
            }
            _ => return CloseReason::for_state(&ctx.machine, TerminalState::Machine(MachineState::Stopped)),
        }
    }
    match ctx.exec.shell_state(exec_id).await {
        Ok(ProcessState::Exited(code)) => {
            CloseReason::new(CloseCause::Normal, format!("the shell exited (code {code})"))
        }
        _ => CloseReason::new(CloseCause::Normal, "the shell exited"),
    }
}

/// The close reason when the shell's output stream fails. The engine's
/// error names its endpoint (an address inside the cluster: "Docker Engine
/// at tcp://10.…:2376 is unreachable: …") and the connection's innards: it
/// goes to the log, with the upgrade request's id; the browser (and the
/// session's recorded reason) gets a plain sentence naming that id.
fn engine_failure(e: &ExecError, request_id: Option<&str>, session: Option<i64>) -> CloseReason {
    let request_id = request_id.unwrap_or("none");
    tracing::warn!(request_id, ?session, error = %e, "a terminal's connection to its engine failed");
    CloseReason::new(
        CloseCause::Error,
        format!("the connection to the machine's node was lost; the error has been logged (request id {request_id})"),
    )
}

/// A close frame's reason is at most 123 bytes.
fn close_text(text: &str) -> String {
    let mut end = text.len().min(123);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use gantry_platform::{executor::ExecError, workspace::CloseCause};

    #[test]
    fn an_unreachable_engine_is_not_named_in_the_close_frame() {
        let e = ExecError::Unavailable("Docker Engine at tcp://10.1.2.3:2376 is unreachable: reset".into());
        let reason = super::engine_failure(&e, Some("3f00aa11bb22cc33"), Some(7));
        assert_eq!(reason.cause, CloseCause::Error);
        let text = super::close_text(&reason.text);
        assert!(!text.contains("tcp://") && !text.contains("10.1.2.3") && !text.contains("reset"), "{text}");
        assert!(text.contains("logged") && text.contains("3f00aa11bb22cc33"), "says where the detail went: {text}");
        // Any other engine error's text stays out too (it may name paths).
        let reason = super::engine_failure(&ExecError::Failed("read /var/lib/docker/x: i/o error".into()), None, None);
        assert!(!reason.text.contains("/var/lib") && reason.text.contains("logged"), "{}", reason.text);
    }

    #[test]
    fn close_reasons_fit_a_frame() {
        assert_eq!(super::close_text(&"é".repeat(100)).len(), 122);
        assert_eq!(super::close_text("short"), "short");
    }
}
