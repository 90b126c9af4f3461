//! HTTP/1.1 written by hand over a `TcpStream`, for what a client library
//! will not do: bodies that are huge, cut on purpose or sent chunked, and
//! `Expect: 100-continue`, where the test acts at the moment the server
//! asks for the body (or sees that it answered first).

use std::{collections::HashMap, net::SocketAddr};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// A final answer: status, headers (lowercase names; the last of a
/// repeated one), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Answer {
    /// The header `name` (lowercase), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Sends `method path` with `headers`, then `len` bytes from `fill`
/// (called with the offset and a buffer), stopping after `cut_at` bytes
/// and closing the socket if given; then reads the answer (None if cut).
pub async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    len: u64,
    cut_at: Option<u64>,
    mut fill: impl FnMut(u64, &mut [u8]),
) -> Option<Answer> {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {len}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut sent = 0u64;
    let stop = cut_at.unwrap_or(len).min(len);
    while sent < stop {
        let n = ((stop - sent) as usize).min(buf.len());
        fill(sent, &mut buf[..n]);
        if sock.write_all(&buf[..n]).await.is_err() {
            break; // the server answered early (a refusal) and closed
        }
        sent += n as u64;
    }
    if cut_at.is_some() {
        drop(sock);
        return None;
    }
    Some(reply(sock).await)
}

/// Sends `method path` with `headers` and `body` in `Transfer-Encoding:
/// chunked` (no Content-Length: a client that does not say how long its
/// body is), one chunk per piece; then reads the answer.
pub async fn raw_chunked(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    pieces: &[&[u8]],
) -> Answer {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    for piece in pieces {
        bytes.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        bytes.extend_from_slice(piece);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"0\r\n\r\n");
    let _ = sock.write_all(&bytes).await; // an early answer may close the socket first
    reply(sock).await
}

/// What the server said first to a request that expects `100 Continue`:
/// it wants the body (the socket, to send it on), or its final answer.
pub enum First {
    Continue(TcpStream),
    Answered(Answer),
}

/// Sends the head of `method path` declaring a body of `len` bytes and
/// `Expect: 100-continue`, and reads the server's first answer.
pub async fn open(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, String)], len: u64) -> First {
    let mut sock = TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {len}\r\nConnection: close\r\nExpect: 100-continue\r\n"
    );
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
pub async fn reply(mut sock: TcpStream) -> Answer {
    let mut got = Vec::new();
    let _ = sock.read_to_end(&mut got).await; // a reset after the answer loses nothing read
    parse(&got)
}

/// Everything the server sends until it closes the connection (or it
/// fails), as text: empty if it closed without a byte.
pub async fn read_to_close(tcp: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&got).into_owned(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

fn parse(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer { status, headers, body: body.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_parsed_with_lowercase_headers() {
        let answer = parse(b"HTTP/1.1 303 See Other\r\nLocation: /x\r\nContent-Length: 2\r\n\r\nok");
        assert_eq!(answer.status, 303);
        assert_eq!(answer.header("location"), Some("/x"));
        assert_eq!(answer.headers["content-length"], "2");
        assert_eq!(answer.body, "ok");
        assert_eq!(parse(b"").status, 0, "nothing read: no status");
    }
}
