//! The HTTP/1.1 accept loop. `axum::serve` gives hyper no timer, so a
//! client that opens a connection and never finishes a request head — or
//! sits idle on a kept-alive one — held a task and a file descriptor until
//! the server stopped: a few thousand such sockets (slowloris) and the
//! process could accept no one. Here every connection has hyper's
//! header-read timeout, which runs from the moment the connection is
//! accepted and again while it waits for each next request.

use axum::{extract::ConnectInfo, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::{future::Future, net::SocketAddr, time::Duration};
use tokio::{net::TcpListener, sync::watch};
use tower::ServiceExt;

/// Limits of every connection.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// The whole request head must arrive within this long after the
    /// connection opens or the previous response ends; otherwise the
    /// connection is closed (a request head sent in time is not cut).
    pub header_read: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits { header_read: Duration::from_secs(30) }
    }
}

/// Serves `app` until `stop` resolves, then until every open connection has
/// ended: each is told to finish the request it is answering and close
/// (the caller decides how long to wait for that).
pub async fn serve_connections(listener: TcpListener, app: Router, stop: impl Future<Output = ()> + Send + 'static, limits: ConnLimits) -> std::io::Result<()> {
    // Every connection holds a receiver: `closed()` below resolves once the
    // last one has ended.
    let (stopping, stop_seen) = watch::channel(false);
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: the condition passes
                    // as connections close; a busy retry would only spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(serve_one(tcp, peer, app.clone(), stop_seen.clone(), limits));
    }
    drop(listener);
    let _ = stopping.send(true);
    drop(stop_seen);
    stopping.closed().await;
    Ok(())
}

async fn serve_one(tcp: tokio::net::TcpStream, peer: SocketAddr, app: Router, mut stopping: watch::Receiver<bool>, limits: ConnLimits) {
    // Handlers read the client's address as `axum::serve` would give it.
    let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read);
    let conn = http.serve_connection(TokioIo::new(tcp), service).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stopping.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}
