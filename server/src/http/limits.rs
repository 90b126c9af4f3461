//! Limits the accept loop (http_serve.rs) puts on what one client can hold
//! once its request head is in — hyper's header-read timer stops there:
//!
//! - [`DeadlineBody`]: the request body must arrive within one total
//!   deadline, counted from when the handler starts reading it. A client
//!   that sends a head with `Content-Length: 100` and then nothing (or a
//!   byte a minute) held its connection and the handler for ever: server
//!   functions `collect()` the body with no timer of their own. The
//!   streamed upload routes lift the deadline ([`lift_body_deadline`]):
//!   their bodies are gigabytes, and they cut a body that stalls (60 s
//!   without a byte) themselves.
//! - [`ConnIo`]: a write that stays pending past a limit fails, so a client
//!   that never reads a large response (`/pkg/*.wasm`, a download) cannot
//!   hold the connection. Reads are not limited: an idle WebSocket or
//!   event stream is fine. It also holds the connection's place under the
//!   connection cap for as long as the socket lives — an upgraded
//!   connection outlives hyper's connection task.
//! - [`raise_fd_limit`] and [`connection_cap`]: the cap stays below what the
//!   process may open.

use crate::http::clients::ClientPlace;
use axum::{
    body::{Body, Bytes, HttpBody},
    extract::Request,
    http::{header, HeaderValue, StatusCode},
    middleware::Next,
    response::Response,
    BoxError,
};
use hyper::body::{Frame, SizeHint};
use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    sync::OwnedSemaphorePermit,
    time::{Instant, Sleep},
};

/// One request's body deadline, shared by the body (which trips it) and
/// the request's extensions (where a route lifts it and the accept loop
/// reads whether it tripped).
#[derive(Clone, Debug, Default)]
pub struct BodyDeadline(Arc<DeadlineState>);

#[derive(Debug, Default)]
struct DeadlineState {
    lifted: AtomicBool,
    tripped: AtomicBool,
}

impl BodyDeadline {
    /// This request's body may take as long as its route allows.
    pub fn lift(&self) {
        self.0.lifted.store(true, Ordering::Relaxed);
    }

    /// Whether the body was cut for arriving too slowly.
    pub fn tripped(&self) -> bool {
        self.0.tripped.load(Ordering::Relaxed)
    }

    /// `body`, failing once `limit` has passed since its first read.
    pub fn wrap<B>(&self, body: B, limit: Duration) -> DeadlineBody<B> {
        DeadlineBody { inner: body, deadline: self.clone(), limit, timer: None }
    }
}

/// Middleware for routes that stream large bodies under their own stall
/// limit: the total deadline would cut a legitimate multi-GB upload.
pub async fn lift_body_deadline(req: Request, next: Next) -> Response {
    if let Some(deadline) = req.extensions().get::<BodyDeadline>() {
        deadline.lift();
    }
    next.run(req).await
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimedOut(Duration);

/// A request body with a total deadline (see the module doc).
pub struct DeadlineBody<B> {
    inner: B,
    deadline: BodyDeadline,
    limit: Duration,
    /// Started by the first read, not by the request head: time the server
    /// spends before reading (sessions, the database) is not the client's.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<B> HttpBody for DeadlineBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        // An empty body never waits; it needs no timer.
        if !this.inner.is_end_stream() && !this.deadline.0.lifted.load(Ordering::Relaxed) {
            let limit = this.limit;
            let timer = this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
            // Checked before the data: the deadline is total, whatever
            // trickle keeps arriving.
            if timer.as_mut().poll(cx).is_ready() {
                this.deadline.0.tripped.store(true, Ordering::Relaxed);
                return Poll::Ready(Some(Err(BodyTimedOut(limit).into())));
            }
        }
        Pin::new(&mut this.inner).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The answer to a request whose body was cut: whatever the handler made
/// of the failed read (a 400, a 500) becomes a 408 that closes the
/// connection — the rest of the body is still on its way. The headers the
/// outer layers set (security headers, request id) are kept.
pub fn body_timed_out(res: Response, limit: Duration) -> Response {
    let (mut parts, _) = res.into_parts();
    parts.status = StatusCode::REQUEST_TIMEOUT;
    for name in [
        header::CONTENT_LENGTH,
        header::CONTENT_ENCODING,
        header::TRANSFER_ENCODING,
        header::CONTENT_DISPOSITION,
        header::ETAG,
        header::LOCATION,
    ] {
        parts.headers.remove(name);
    }
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    parts.headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    Response::from_parts(parts, Body::from(format!("the request body did not arrive within {} s", limit.as_secs_f64())))
}

/// An accepted socket: writes that stall fail (see the module doc); it
/// holds its connection's place under the cap until it is dropped.
pub struct ConnIo {
    tcp: TcpStream,
    write_stall: Duration,
    /// Runs while a write is pending; reset when one makes progress.
    stall: Pin<Box<Sleep>>,
    stalling: bool,
    // Declared (so dropped) after the socket: the places free once its
    // descriptor is closed.
    _place: OwnedSemaphorePermit,
    _client: ClientPlace,
}

impl ConnIo {
    pub fn new(tcp: TcpStream, place: OwnedSemaphorePermit, client: ClientPlace, write_stall: Duration) -> Self {
        ConnIo {
            tcp,
            write_stall,
            stall: Box::pin(tokio::time::sleep(write_stall)),
            stalling: false,
            _place: place,
            _client: client,
        }
    }

    /// A write's outcome, or TimedOut once writes have stayed pending for
    /// the limit.
    fn watch<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalling = false;
            return polled;
        }
        if !self.stalling {
            self.stalling = true;
            let until = Instant::now() + self.write_stall;
            self.stall.as_mut().reset(until);
        }
        match self.stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {:?}", self.write_stall),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.tcp).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs);
        this.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    // A socket's flush and shutdown never wait on the client; and a flush
    // that is ready says nothing about progress, so it must not reset the
    // write's timer.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// Descriptors kept for everything but client connections: the database,
/// Docker, dataset files, logs.
const RESERVED_FDS: u64 = 256;

/// Raises the soft limit on open files to the hard limit (the soft one is
/// often 1024, which a few hundred slow clients exhaust, while the hard
/// one is usually far higher). Returns the limit now in force, if known.
pub fn raise_fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit/setrlimit only read or write the struct passed.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            tracing::warn!(error = %io::Error::last_os_error(), "cannot read the open-file limit");
            return None;
        }
        let before = lim.rlim_cur;
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = lim.rlim_max;
            } else {
                // macOS refuses an unlimited hard limit; the soft one stays.
                tracing::warn!(error = %io::Error::last_os_error(), soft = before, hard = lim.rlim_max, "cannot raise the open-file limit");
            }
        }
        tracing::info!(before, now = lim.rlim_cur, "open-file limit");
        #[allow(clippy::unnecessary_cast)] // rlim_t is u64 on 64-bit Linux, not everywhere
        let now = lim.rlim_cur as u64;
        Some(now)
    }
    #[cfg(not(unix))]
    None
}

/// The connection cap: `wanted`, lowered when the open-file limit could not
/// hold it — each connection may use two descriptors (a terminal's or an
/// upload's to Docker), and the rest of the server needs some.
pub fn connection_cap(wanted: usize, fd_limit: Option<u64>) -> usize {
    let Some(limit) = fd_limit else { return wanted };
    let fits = usize::try_from(limit.saturating_sub(RESERVED_FDS) / 2).unwrap_or(usize::MAX).max(1);
    if fits < wanted {
        tracing::warn!(
            wanted,
            fd_limit = limit,
            cap = fits,
            "--max-connections lowered to what the open-file limit holds"
        );
    }
    wanted.min(fits)
}

#[cfg(test)]
mod tests {
    use super::connection_cap;

    #[test]
    fn the_cap_fits_the_open_file_limit() {
        assert_eq!(connection_cap(4096, Some(1_048_576)), 4096);
        assert_eq!(connection_cap(4096, Some(1024)), 384);
        assert_eq!(connection_cap(4096, Some(100)), 1);
        assert_eq!(connection_cap(4096, None), 4096);
    }
}
