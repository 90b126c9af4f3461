//! A commit is answered by the engine only once the container's whole
//! writable layer is an image — minutes for gigabytes installed outside
//! /data. Before, it had the 30 s per-request timeout of every other call:
//! a snapshot (or an idle reclaim) of such a machine failed at every try.
//! Shown against a stand-in engine on 127.0.0.1 that takes 3 s to answer a
//! commit, with a per-request timeout of 1 s.

use gantry_platform::executor::{DockerExecutor, Executor};
use std::time::Duration;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// Answers one connection's requests: the version, a slow commit, the
/// committed image.
async fn serve(mut sock: TcpStream) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
        buf.drain(..head_end + length);
        let (status, body) = if path.ends_with("/version") {
            ("200 OK", r#"{"ApiVersion":"1.43","Version":"24.0.0"}"#)
        } else if path.contains("/commit") {
            tokio::time::sleep(Duration::from_secs(3)).await;
            ("201 Created", r#"{"Id":"sha256:5ca1ab1e"}"#)
        } else if path.contains("/images/") && path.ends_with("/json") {
            ("200 OK", r#"{"Id":"sha256:5ca1ab1e","Size":4096}"#)
        } else {
            ("404 Not Found", r#"{"message":"not in this stand-in"}"#)
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if sock.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_commit_slower_than_the_request_timeout_still_makes_the_snapshot() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(serve(sock));
            }
        });
        let ex = Executor::Docker(DockerExecutor::connect(&format!("tcp://{addr}")).unwrap().with_timeouts(Duration::from_secs(1), Duration::from_secs(1)));
        let image = ex.commit_container("big-layer", "gantry-snap-test:s1").await.expect("a slow commit is not cut by the request timeout");
        assert_eq!((image.id.as_str(), image.size_bytes), ("sha256:5ca1ab1e", 4096));
    }
}
