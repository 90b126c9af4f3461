//! The bridge between the WebSocket and the shell: terminal bytes both
//! ways, resizes, and the watch for whatever ends the session first.

use super::{resize, session::End, Ctx};
use axum::extract::ws::{Message, WebSocket};
use futures_util::{
    stream::{SplitSink, SplitStream},
    SinkExt, StreamExt,
};
use gantry_platform::{
    executor::inside::{ByteStream, TtySize},
    workspace::{sessions::Registration, CloseCause, CloseReason},
};
use serde::Deserialize;
use std::{
    pin::Pin,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};
use tokio::io::{AsyncWrite, AsyncWriteExt};

#[derive(Deserialize)]
struct Control {
    resize: Option<Resize>,
}

#[derive(Deserialize)]
struct Resize {
    cols: u16,
    rows: u16,
}

/// When a byte last went either way: the idle limit counts from it.
struct Activity {
    started: Instant,
    /// Milliseconds since `started` of the last byte in either direction.
    last: AtomicU64,
}

impl Activity {
    /// Counted from now, as if a byte had just gone by.
    fn new() -> Activity {
        Activity { started: Instant::now(), last: AtomicU64::new(0) }
    }

    /// A byte either way puts the idle limit off.
    fn touch(&self) {
        self.last.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// How long nothing has been typed or printed.
    fn quiet(&self) -> Duration {
        Duration::from_millis(self.started.elapsed().as_millis() as u64 - self.last.load(Ordering::Relaxed))
    }
}

/// Runs every way a session can go on or end side by side: the first to
/// end says why, and the others are dropped with it.
pub(super) async fn bridge(
    ctx: &Ctx,
    exec_id: &str,
    output: &mut ByteStream,
    input: &mut Pin<Box<dyn AsyncWrite + Send>>,
    tx: &mut SplitSink<WebSocket, Message>,
    rx: &mut SplitStream<WebSocket>,
    registration: &mut Registration,
    stopped: impl std::future::Future<Output = ()>,
) -> End {
    let activity = Activity::new();
    let mut stopped = std::pin::pin!(stopped);
    let (wanted_size, resizer) = resize::channel();
    // A resize the engine fails is only a wrongly sized screen.
    let exec = &ctx.exec;
    let resizing = resizer.run(|size| async move {
        let _ = exec.resize_shell(exec_id, size).await;
    });
    tokio::select! {
        e = pump_out(output, tx, &activity) => e,
        e = pump_in(rx, input, &wanted_size, &activity) => e,
        _ = resizing => unreachable!("the resizer waits for ever once the input pump ends"),
        e = signal(registration) => e,
        e = idle(&activity, ctx.idle) => e,
        ended = ctx.session.wait() => End::Signal(ended.close_reason()),
        _ = stopped.as_mut() => End::Signal(CloseReason::new(CloseCause::ServerStopping, "the server is shutting down")),
    }
}

/// Output is sent before the next read: a slow browser slows the shell, as
/// a slow ssh client does, and a session holds one buffer.
async fn pump_out(output: &mut ByteStream, tx: &mut SplitSink<WebSocket, Message>, activity: &Activity) -> End {
    while let Some(chunk) = output.next().await {
        match chunk {
            Ok(bytes) => {
                activity.touch();
                if tx.send(Message::Binary(bytes)).await.is_err() {
                    return End::ClientClosed;
                }
            }
            Err(e) => return End::EngineError(e),
        }
    }
    End::ShellEnded
}

/// Keystrokes are written through as they arrive; a resize only records
/// the newest size, so no keystroke waits behind the engine's resize.
async fn pump_in(
    rx: &mut SplitStream<WebSocket>,
    input: &mut Pin<Box<dyn AsyncWrite + Send>>,
    wanted_size: &resize::Wanted,
    activity: &Activity,
) -> End {
    while let Some(msg) = rx.next().await {
        match msg {
            Ok(Message::Binary(bytes)) => {
                activity.touch();
                if input.write_all(&bytes).await.is_err() || input.flush().await.is_err() {
                    // The engine closed its side: the output pump sees why.
                    std::future::pending::<()>().await;
                }
            }
            Ok(Message::Text(text)) => {
                if let Ok(Control { resize: Some(r) }) = serde_json::from_str::<Control>(text.as_str()) {
                    wanted_size.set(TtySize::new(r.cols, r.rows));
                }
            }
            Ok(Message::Close(_)) | Err(_) => return End::ClientClosed,
            Ok(_) => {}
        }
    }
    End::ClientClosed
}

/// A close from elsewhere (an admin, the machine stopping or deleted)
/// reaches the session through its registration, with its reason.
async fn signal(registration: &mut Registration) -> End {
    loop {
        if let Some(reason) = registration.closed.borrow_and_update().clone() {
            return End::Signal(reason);
        }
        if registration.closed.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A terminal nobody uses still holds a shell and a slot: it ends once
/// `limit` has passed with nothing typed or printed.
async fn idle(activity: &Activity, limit: Duration) -> End {
    loop {
        let quiet = activity.quiet();
        if quiet >= limit {
            return End::Idle;
        }
        tokio::time::sleep(limit - quiet).await;
    }
}
