//! The HTTP/1.1 accept loop. `axum::serve` gives hyper no timer, so a
//! client that opens a connection and never finishes a request head — or
//! sits idle on a kept-alive one — held a task and a file descriptor until
//! the server stopped: a few thousand such sockets (slowloris) and the
//! process could accept no one. Here every connection has
//!
//! - hyper's header-read timeout, which runs from the moment the connection
//!   is accepted and again while it waits for each next request (a reverse
//!   proxy's upstream keep-alive must be shorter, or it will reuse
//!   connections the server is closing);
//! - a total deadline on its request bodies, except on the streamed upload
//!   routes, which lift it and cut a stalled body themselves (a 408 that
//!   closes the connection; see http_limits.rs);
//! - a limit on how long a write may stay pending (a client that stops
//!   reading a response); reads are not limited, so idle WebSockets and
//!   event streams stay open;
//! - a place under a global connection cap: beyond it a new connection is
//!   closed at once, before it can use up the process's descriptors;
//! - a place under its client address's cap (see http_clients.rs), so one
//!   host cannot take every place.
//!
//! Only HTTP/1.1 is served (and its upgrades); HTTP/2 without TLS (h2c),
//! which `axum::serve` also answered, is not — put a proxy in front for
//! HTTP/2.

use super::{
    clients::ClientPlaces,
    limits::{body_timed_out, BodyDeadline, ConnIo},
};
use axum::{extract::ConnectInfo, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::{future::Future, io, net::SocketAddr, sync::Arc, time::Duration};
use tokio::{
    net::TcpListener,
    sync::{watch, Semaphore},
};
use tower::ServiceExt;

/// Limits of every connection.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// The whole request head must arrive within this long after the
    /// connection opens or the previous response ends; otherwise the
    /// connection is closed (a request head sent in time is not cut).
    pub header_read: Duration,
    /// A request body must have arrived this long after its handler began
    /// to read it; otherwise the request is answered 408 and the
    /// connection closed. Routes that lift it are not limited.
    pub request_body: Duration,
    /// A write to the client that stays pending this long ends the
    /// connection.
    pub write_stall: Duration,
    /// Connections open at once; one more is closed as soon as accepted.
    pub max_connections: usize,
    /// Connections open at once from one client address, the same way
    /// (0: no such cap — behind a trusted proxy every client is the proxy).
    pub max_per_client: usize,
}

impl ConnLimits {
    pub const DEFAULT: ConnLimits = ConnLimits {
        header_read: Duration::from_secs(30),
        request_body: Duration::from_secs(30),
        // As long as an upload's body may stall (multipart_guard::IDLE).
        write_stall: Duration::from_secs(60),
        max_connections: 4096,
        // A quarter of the places: one host (or one office's NAT) cannot
        // take them all.
        max_per_client: 1024,
    };
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits::DEFAULT
    }
}

/// Serves `app` until `stop` resolves, then until every open connection has
/// ended: each is told to finish the request it is answering and close
/// (the caller decides how long to wait for that).
pub async fn serve_connections(
    listener: TcpListener,
    app: Router,
    stop: impl Future<Output = ()> + Send + 'static,
    limits: ConnLimits,
) -> io::Result<()> {
    // Every connection holds a receiver: `closed()` below resolves once the
    // last one has ended.
    let (stopping, stop_seen) = watch::channel(false);
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let clients = ClientPlaces::new(limits.max_per_client);
    // Logged when refusing starts and when it ends, not per connection:
    // a flood would flood the log.
    let mut refusing = false;
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // The client gave up before we took its connection: the
                // next one is unaffected.
                Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionRefused) => continue,
                Err(e) => {
                    // Out of descriptors and the like: the condition passes
                    // as connections close; a busy retry would only spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            // Dropping the socket closes it: the client learns at once
            // rather than waiting, and it holds nothing here.
            if !refusing {
                tracing::warn!(
                    max = limits.max_connections,
                    "connection cap reached: closing new connections until some end"
                );
                refusing = true;
            }
            continue;
        };
        if refusing {
            tracing::info!("below the connection cap again: accepting connections");
            refusing = false;
        }
        let Some(client) = clients.enter(peer.ip()) else {
            // Per connection, so at debug: a flood must not flood the log.
            tracing::debug!(%peer, max = limits.max_per_client, "client's connection cap reached: closed");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let io = ConnIo::new(tcp, place, client, limits.write_stall);
        tokio::spawn(serve_one(io, peer, app.clone(), stop_seen.clone(), limits));
    }
    drop(listener);
    let _ = stopping.send(true);
    drop(stop_seen);
    stopping.closed().await;
    Ok(())
}

async fn serve_one(io: ConnIo, peer: SocketAddr, app: Router, mut stopping: watch::Receiver<bool>, limits: ConnLimits) {
    let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        // Handlers read the client's address as `axum::serve` would give it.
        req.extensions_mut().insert(ConnectInfo(peer));
        let deadline = BodyDeadline::default();
        req.extensions_mut().insert(deadline.clone());
        let req = req.map(|body| axum::body::Body::new(deadline.wrap(body, limits.request_body)));
        let answer = app.clone().oneshot(req);
        async move {
            let res = answer.await?;
            if deadline.tripped() {
                // Per request, so at debug: a flood of them must not flood the log.
                tracing::debug!(%peer, "request body too slow: answered 408");
                return Ok(body_timed_out(res, limits.request_body));
            }
            Ok::<_, std::convert::Infallible>(res)
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read);
    let conn = http.serve_connection(TokioIo::new(io), service).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stopping.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}
