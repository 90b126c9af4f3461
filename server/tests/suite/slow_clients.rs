//! The accept loop (server/src/http_serve.rs): a client that opens a
//! connection and never finishes a request head, or stays idle on a
//! kept-alive one, is disconnected after the header-read timeout instead
//! of holding a socket until the server stops (slowloris); requests sent
//! in time are answered with the client's address; a stop lets the request
//! in progress finish and then closes every connection.

use axum::{extract::ConnectInfo, routing::get, Router};
use gantry_server::http_serve::{serve_connections, ConnLimits};
use std::{net::SocketAddr, sync::Arc, time::Duration};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{oneshot, Notify},
};

const LIMITS: ConnLimits = ConnLimits { header_read: Duration::from_millis(500) };

/// A server whose `/slow` answers only when `release` is notified.
async fn start(stop: oneshot::Receiver<()>, release: Arc<Notify>, entered: Arc<Notify>) -> (SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>) {
    let app = Router::new().route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() })).route(
        "/slow",
        get(move || async move {
            entered.notify_one();
            release.notified().await;
            "finished"
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = tokio::spawn(serve_connections(
        listener,
        app,
        async move {
            let _ = stop.await;
        },
        LIMITS,
    ));
    (addr, served)
}

/// Reads until the server closes the connection; what it sent before.
async fn read_to_close(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&got).into_owned(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one whole response with a known short body.
async fn read_response(tcp: &mut TcpStream, ends_with: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).ends_with(ends_with) {
        let n = tcp.read(&mut buf).await.unwrap();
        assert!(n > 0, "the connection closed before the response ended: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

gantry_testkit::timed_test! {
    async fn half_sent_and_idle_connections_are_closed_and_others_answered() {
        let (_stop, stop) = oneshot::channel();
        let (addr, _served) = start(stop, Arc::new(Notify::new()), Arc::new(Notify::new())).await;

        // Never finishes its request head: closed without an answer.
        let mut half = TcpStream::connect(addr).await.unwrap();
        half.write_all(b"GET /peer HTTP/1.1\r\nHost: gantry\r\nX-Slow: 1").await.unwrap();
        // Sends nothing at all.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        // A whole request, then idle on the kept-alive connection.
        let mut kept = TcpStream::connect(addr).await.unwrap();
        kept.write_all(b"GET /peer HTTP/1.1\r\nHost: gantry\r\n\r\n").await.unwrap();
        let me = kept.local_addr().unwrap().to_string();
        let answer = read_response(&mut kept, &me).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

        let half_got = read_to_close(&mut half).await;
        assert!(!half_got.contains("200 OK"), "a half-sent request was answered: {half_got}");
        assert_eq!(read_to_close(&mut silent).await, "", "a silent connection got an answer");
        assert_eq!(read_to_close(&mut kept).await, "", "an idle kept-alive connection got more than its answer");

        // The server still answers, with the client's own address.
        let mut fresh = TcpStream::connect(addr).await.unwrap();
        fresh.write_all(b"GET /peer HTTP/1.1\r\nHost: gantry\r\nConnection: close\r\n\r\n").await.unwrap();
        let answer = read_to_close(&mut fresh).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with(&fresh.local_addr().unwrap().to_string()), "{answer}");
    }
}

gantry_testkit::timed_test! {
    async fn a_stop_finishes_the_request_in_progress_then_closes_every_connection() {
        let (stop_tx, stop) = oneshot::channel();
        let (release, entered) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let (addr, served) = start(stop, release.clone(), entered.clone()).await;

        let mut busy = TcpStream::connect(addr).await.unwrap();
        busy.write_all(b"GET /slow HTTP/1.1\r\nHost: gantry\r\n\r\n").await.unwrap();
        entered.notified().await;
        let mut idle = TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET /peer HTTP/1.1\r\nHost: gantry\r\n\r\n").await.unwrap();
        let me = idle.local_addr().unwrap().to_string();
        read_response(&mut idle, &me).await;

        stop_tx.send(()).unwrap();
        // The idle connection is closed; the busy one is not cut.
        assert_eq!(read_to_close(&mut idle).await, "");
        assert!(!served.is_finished(), "the server ended with a request still being answered");
        release.notify_one();
        let answer = read_to_close(&mut busy).await;
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("finished"), "{answer}");
        served.await.unwrap().unwrap();
    }
}
