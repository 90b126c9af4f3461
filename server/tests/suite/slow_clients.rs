//! The accept loop (server/src/http_serve.rs, http_limits.rs): a client that
//! opens a connection and never finishes a request head, or stays idle on a
//! kept-alive one, is disconnected after the header-read timeout (slowloris);
//! a request body that does not arrive in time is answered 408, except on
//! routes that lift the deadline; a client that stops reading a response is
//! disconnected; beyond the connection cap new connections are closed at
//! once; slow handlers, bodies sent in time and upgraded connections are
//! left alone; a stop lets the request in progress finish and then closes
//! every connection.

use axum::{
    body::{Body, Bytes},
    extract::{ConnectInfo, Request},
    http::header,
    middleware::from_fn,
    response::{IntoResponse, Response},
    routing::{get, post},
    Router,
};
use futures_util::StreamExt;
use gantry_server::http::{
    limits::lift_body_deadline,
    serve::{serve_connections, ConnLimits},
};
use gantry_testkit::install::Install;
use gantry_testkit::raw_http::read_to_close;
use hyper_util::rt::TokioIo;
use std::{convert::Infallible, future::Future, net::SocketAddr, sync::Arc, time::Duration};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::{oneshot, Notify},
};

/// Longer than any test may run (the testkit's limit): a connection closed
/// during a test that uses it was not closed by that timer.
const NEVER: Duration = Duration::from_secs(3600);
const SHORT: Duration = Duration::from_millis(500);
const LIMITS: ConnLimits = ConnLimits { header_read: SHORT, ..ConnLimits::DEFAULT };
const NO_HEADER_LIMIT: ConnLimits = ConnLimits { header_read: NEVER, ..ConnLimits::DEFAULT };

/// What the test app's handlers tell the test, or wait for from it.
#[derive(Clone, Default)]
struct Hooks {
    /// `/slow` has started; it answers when `release` is notified.
    entered: Arc<Notify>,
    release: Arc<Notify>,
    /// `/upload` has read a piece of its body.
    piece_read: Arc<Notify>,
    /// `/endless`'s response body was dropped (its connection ended).
    endless_dropped: Arc<Notify>,
}

struct NotifyOnDrop(Arc<Notify>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

fn app(hooks: &Hooks) -> Router {
    let Hooks { entered, release, piece_read, endless_dropped } = hooks.clone();
    Router::new()
        .route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }))
        .route(
            "/slow",
            get(move || async move {
                entered.notify_one();
                release.notified().await;
                "finished"
            }),
        )
        // A handler that reads its whole body, as server functions do.
        .route("/echo", post(|body: String| async move { body }))
        // A streamed upload: no total body deadline.
        .route(
            "/upload",
            post(move |body: Body| async move {
                let mut body = body.into_data_stream();
                let mut got = Vec::new();
                while let Some(piece) = body.next().await {
                    match piece {
                        Ok(piece) => got.extend_from_slice(&piece),
                        Err(e) => return (axum::http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
                    }
                    piece_read.notify_one();
                }
                String::from_utf8_lossy(&got).into_owned().into_response()
            })
            .layer(from_fn(lift_body_deadline)),
        )
        // A raw upgrade: the connection then echoes what it is sent.
        .route(
            "/upgrade",
            get(|mut req: Request| async move {
                let upgrade = hyper::upgrade::on(&mut req);
                tokio::spawn(async move {
                    let Ok(upgraded) = upgrade.await else { return };
                    let mut io = TokioIo::new(upgraded);
                    let mut buf = [0u8; 256];
                    while let Ok(n @ 1..) = io.read(&mut buf).await {
                        if io.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
                Response::builder()
                    .status(101)
                    .header(header::CONNECTION, "upgrade")
                    .header(header::UPGRADE, "echo")
                    .body(Body::empty())
                    .unwrap()
            }),
        )
        .route(
            "/endless",
            get(move || async move {
                let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
                let body = futures_util::stream::unfold(NotifyOnDrop(endless_dropped), move |guard| {
                    let chunk = chunk.clone();
                    async move { Some((Ok::<_, Infallible>(chunk), guard)) }
                });
                Body::from_stream(body)
            }),
        )
}

/// Serves `app` with `limits` until `stop` resolves.
async fn serve_until(
    app: Router,
    limits: ConnLimits,
    stop: impl Future<Output = ()> + Send + 'static,
) -> (SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (addr, tokio::spawn(serve_connections(listener, app, stop, limits)))
}

async fn serve(app: Router, limits: ConnLimits) -> SocketAddr {
    serve_until(app, limits, std::future::pending()).await.0
}

/// Connects and sends `request` (the whole of it, or its start).
async fn send(addr: SocketAddr, request: &str) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    tcp
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

/// `GET /peer` on a kept-alive connection; asserts the answer.
async fn get_peer(tcp: &mut TcpStream) {
    tcp.write_all(b"GET /peer HTTP/1.1\r\nHost: gantry\r\n\r\n").await.unwrap();
    let me = tcp.local_addr().unwrap().to_string();
    let answer = read_response(tcp, &me).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

gantry_testkit::timed_test! {
    async fn half_sent_and_idle_connections_are_closed_and_others_answered() {
        let addr = serve(app(&Hooks::default()), LIMITS).await;

        // Never finishes its request head: closed without an answer.
        let mut half = send(addr, "GET /peer HTTP/1.1\r\nHost: gantry\r\nX-Slow: 1").await;
        // Sends nothing at all.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        // A whole request, then idle on the kept-alive connection.
        let mut kept = TcpStream::connect(addr).await.unwrap();
        get_peer(&mut kept).await;

        let half_got = read_to_close(&mut half).await;
        assert!(!half_got.contains("200 OK"), "a half-sent request was answered: {half_got}");
        assert_eq!(read_to_close(&mut silent).await, "", "a silent connection got an answer");
        assert_eq!(read_to_close(&mut kept).await, "", "an idle kept-alive connection got more than its answer");

        // The server still answers, with the client's own address.
        let mut fresh = send(addr, "GET /peer HTTP/1.1\r\nHost: gantry\r\nConnection: close\r\n\r\n").await;
        let answer = read_to_close(&mut fresh).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with(&fresh.local_addr().unwrap().to_string()), "{answer}");
    }
}

gantry_testkit::timed_test! {
    async fn slow_handlers_streamed_bodies_and_upgraded_connections_outlive_the_header_timeout() {
        let hooks = Hooks::default();
        let addr = serve(app(&hooks), LIMITS).await;

        let mut busy = send(addr, "GET /slow HTTP/1.1\r\nHost: gantry\r\n\r\n").await;
        hooks.entered.notified().await;
        let mut trickle = send(addr, "POST /echo HTTP/1.1\r\nHost: gantry\r\nContent-Length: 11\r\n\r\nhello ").await;
        let mut upgraded = send(addr, "GET /upgrade HTTP/1.1\r\nHost: gantry\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n").await;
        let head = read_response(&mut upgraded, "\r\n\r\n").await;
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");

        // Opened after the three: once the header timeout has closed it,
        // it has run out for each of them too.
        let mut canary = TcpStream::connect(addr).await.unwrap();
        assert_eq!(read_to_close(&mut canary).await, "");

        hooks.release.notify_one();
        let answer = read_response(&mut busy, "finished").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        trickle.write_all(b"world").await.unwrap();
        let answer = read_response(&mut trickle, "hello world").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        upgraded.write_all(b"ping").await.unwrap();
        let mut echo = [0u8; 4];
        upgraded.read_exact(&mut echo).await.unwrap();
        assert_eq!(&echo, b"ping");
    }
}

gantry_testkit::timed_test! {
    async fn a_request_body_that_does_not_arrive_in_time_is_answered_408_unless_the_route_lifts_the_deadline() {
        let hooks = Hooks::default();
        let limits = ConnLimits { request_body: SHORT, ..NO_HEADER_LIMIT };
        let addr = serve(app(&hooks), limits).await;

        // A streamed upload, begun first: its handler is reading.
        let mut upload = send(addr, "POST /upload HTTP/1.1\r\nHost: gantry\r\nContent-Length: 11\r\n\r\nhello ").await;
        hooks.piece_read.notified().await;
        // A head that announces 100 bytes, then 4 of them and silence.
        let mut silent = send(addr, "POST /echo HTTP/1.1\r\nHost: gantry\r\nContent-Length: 100\r\n\r\nsome").await;
        let got = read_to_close(&mut silent).await;
        assert!(got.starts_with("HTTP/1.1 408"), "{got}");
        assert!(got.to_ascii_lowercase().contains("connection: close"), "{got}");

        // The upload's deadline would have run out before the other's.
        upload.write_all(b"world").await.unwrap();
        let answer = read_response(&mut upload, "hello world").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // A body sent in time is answered.
        let mut prompt = send(addr, "POST /echo HTTP/1.1\r\nHost: gantry\r\nContent-Length: 5\r\n\r\nhello").await;
        let answer = read_response(&mut prompt, "hello").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}

gantry_testkit::timed_test! {
    async fn the_real_router_answers_a_silent_sign_in_body_408() {
        let Install { dir, pool } = Install::new().await;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = gantry_server::router::Options { site_root: dir.path().join("site"), site_addr: addr, secure_cookies: false, public_origin: None, page_cache_ms: gantry_server::router::PAGE_CACHE_MS };
        let app = gantry_server::router::build(opts, pool).await.unwrap();
        let limits = ConnLimits { request_body: SHORT, ..NO_HEADER_LIMIT };
        tokio::spawn(serve_connections(listener, app, std::future::pending(), limits));

        let head = "POST /api/login HTTP/1.1\r\nHost: gantry\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n";
        let mut silent = send(addr, &format!("{head}username=ad")).await;
        let got = read_to_close(&mut silent).await;
        assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    }
}

gantry_testkit::timed_test! {
    async fn beyond_the_connection_cap_a_new_connection_is_closed_at_once_until_one_ends() {
        let addr = serve(app(&Hooks::default()), ConnLimits { max_connections: 2, ..NO_HEADER_LIMIT }).await;
        let mut first = TcpStream::connect(addr).await.unwrap();
        get_peer(&mut first).await;
        let mut second = TcpStream::connect(addr).await.unwrap();
        get_peer(&mut second).await;

        let mut third = TcpStream::connect(addr).await.unwrap();
        assert_eq!(read_to_close(&mut third).await, "", "a connection beyond the cap got an answer");

        drop(first);
        // The server frees the place once it sees the close, which a client
        // cannot observe: like any refused client, try again.
        loop {
            let mut next = TcpStream::connect(addr).await.unwrap();
            let _ = next.write_all(b"GET /peer HTTP/1.1\r\nHost: gantry\r\nConnection: close\r\n\r\n").await;
            if read_to_close(&mut next).await.starts_with("HTTP/1.1 200") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        get_peer(&mut second).await;
    }
}

gantry_testkit::timed_test! {
    async fn one_client_address_gets_at_most_its_share_of_connections_and_others_still_get_in() {
        let addr = serve(app(&Hooks::default()), ConnLimits { max_per_client: 2, ..NO_HEADER_LIMIT }).await;
        let mut first = TcpStream::connect(addr).await.unwrap();
        get_peer(&mut first).await;
        let mut second = TcpStream::connect(addr).await.unwrap();
        get_peer(&mut second).await;
        // A third from the same address is closed without an answer …
        let mut third = TcpStream::connect(addr).await.unwrap();
        assert_eq!(read_to_close(&mut third).await, "", "a connection beyond the client's cap got an answer");
        // … while another client (another loopback source address) is served.
        let other = tokio::net::TcpSocket::new_v4().unwrap();
        other.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut other = other.connect(addr).await.unwrap();
        get_peer(&mut other).await;
        // The first two still work.
        get_peer(&mut first).await;
        get_peer(&mut second).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_client_that_stops_reading_a_response_is_disconnected() {
        let hooks = Hooks::default();
        let addr = serve(app(&hooks), ConnLimits { write_stall: SHORT, ..NO_HEADER_LIMIT }).await;
        // Asks for an endless response and reads none of it: the socket
        // buffers fill, the server's write stays pending, and the
        // connection (with the response body) is dropped.
        let _reads_nothing = send(addr, "GET /endless HTTP/1.1\r\nHost: gantry\r\n\r\n").await;
        hooks.endless_dropped.notified().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_stop_finishes_the_request_in_progress_then_closes_every_connection() {
        let (stop_tx, stop) = oneshot::channel::<()>();
        let hooks = Hooks::default();
        // No header timeout within the test: only the stop can close the
        // idle connection.
        let (addr, served) = serve_until(app(&hooks), NO_HEADER_LIMIT, async move {
            let _ = stop.await;
        })
        .await;

        let mut busy = send(addr, "GET /slow HTTP/1.1\r\nHost: gantry\r\n\r\n").await;
        hooks.entered.notified().await;
        let mut idle = TcpStream::connect(addr).await.unwrap();
        get_peer(&mut idle).await;

        stop_tx.send(()).unwrap();
        // The idle connection is closed; the busy one is not cut.
        assert_eq!(read_to_close(&mut idle).await, "");
        assert!(!served.is_finished(), "the server ended with a request still being answered");
        hooks.release.notify_one();
        let answer = read_to_close(&mut busy).await;
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("finished"), "{answer}");
        served.await.unwrap().unwrap();
    }
}
