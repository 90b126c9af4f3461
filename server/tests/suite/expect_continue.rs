//! Raw HTTP/1.1 requests that say `Expect: 100-continue`: the server
//! answers `100 Continue` when the route first reads the body — after it
//! let the request in and began what the body is for — or answers for good
//! without reading a byte of it. A test acts at that exact moment, with no
//! waiting, or sees that a refusal came before the body.

use std::net::SocketAddr;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// What the server said first: it wants the body (the socket, to send it
/// on), or its final answer.
pub enum First {
    Continue(TcpStream),
    Answered(Reply),
}

/// A final answer: status, lowercase header names, body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Sends the head of `method path` declaring a body of `len` bytes.
pub async fn open(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, String)], len: u64) -> First {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {len}\r\nConnection: close\r\nExpect: 100-continue\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1];
    // Byte by byte up to the end of the first head: nothing after it is taken.
    while !got.ends_with(b"\r\n\r\n") {
        match sock.read(&mut buf).await {
            Ok(1) => got.push(buf[0]),
            _ => break,
        }
    }
    if got.starts_with(b"HTTP/1.1 100") {
        return First::Continue(sock);
    }
    let mut rest = Vec::new();
    let _ = sock.read_to_end(&mut rest).await;
    got.extend_from_slice(&rest);
    First::Answered(parse(&got))
}

/// The server asked for the body: the socket to send it on. Panics with
/// the answer if the server answered instead.
pub async fn body_wanted(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    len: u64,
) -> TcpStream {
    match open(addr, method, path, headers, len).await {
        First::Continue(sock) => sock,
        First::Answered(reply) => panic!("answered before asking for the body: {reply:?}"),
    }
}

/// Reads the final answer (the server closes after it: `Connection: close`).
pub async fn reply(mut sock: TcpStream) -> Reply {
    let mut got = Vec::new();
    let _ = sock.read_to_end(&mut got).await; // a reset after the answer loses nothing read
    parse(&got)
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply { status, headers, body: body.to_string() }
}
