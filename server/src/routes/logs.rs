//! A machine's container logs (stdout and stderr): the last lines as plain
//! text, or followed live as Server-Sent Events (one event per line, an
//! `end` event when the container stops, the server stops, or the session
//! that opened it ends: signed out, unused past the sign-in limit, or its
//! account changed — see `SessionWatch`). The browser keeps a bounded
//! number of lines; the server holds at most one line (capped) per stream.

use super::{
    terminal::Full,
    workspace::{enter, exec_error, executor, refusal, refuse, WsState},
};
use axum::{
    body::Body,
    extract::{Path, Query, Request, State},
    http::{header, StatusCode},
    response::{
        sse::{Event, KeepAlive, Sse},
        IntoResponse, Response,
    },
};
use bytes::{Bytes, BytesMut};
use futures_util::{stream, Stream, StreamExt};
use gantry_platform::{executor::inside::ByteStream, workspace::LOG_TAIL_LINES};
use serde::Deserialize;
use std::convert::Infallible;

/// Longest line passed on as one event; longer lines are split.
pub const MAX_LINE: usize = 16 * 1024;
/// Most lines a `tail=N` request may ask for.
const MAX_TAIL: u64 = 100_000;
/// Most bytes of a short tail (at most [`LOG_TAIL_LINES`] lines) read into
/// memory before answering; a longer one streams under the limits.
const SHORT_TAIL_BYTES: usize = 256 * 1024;

#[derive(Debug, Default, Deserialize)]
pub struct LogQuery {
    tail: Option<String>,
    follow: Option<String>,
}

pub async fn logs(State(st): State<WsState>, Path(id): Path<i64>, Query(q): Query<LogQuery>, req: Request) -> Response {
    let (parts, _body) = req.into_parts();
    let (user, target) = match enter(&st, &parts, id, false).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let (container, node) = match target.require_container() {
        Ok((c, n)) => (c.to_string(), n),
        Err(r) => return refusal(r),
    };
    let tail = match q.tail.as_deref().map(str::trim) {
        None | Some("") => Some(LOG_TAIL_LINES),
        Some("all") => None,
        Some(n) => match n.parse::<u64>() {
            Ok(n) => Some(n.min(MAX_TAIL)),
            Err(_) => return refuse(StatusCode::BAD_REQUEST, "tail must be a number of lines or \"all\""),
        },
    };
    let follow = matches!(q.follow.as_deref(), Some("1" | "true" | "on" | "yes"));
    // A followed log lasts as long as the container runs, and a whole (or
    // long) one as long as the client takes to read it: without a limit,
    // one user could hold any number of engine connections and watchers.
    let long = tail.is_none_or(|n| n > LOG_TAIL_LINES);
    let mut slot = match (follow || long).then(|| take_slot(&st, user.id)) {
        None => None,
        Some(Ok(slot)) => Some(slot),
        Some(Err(refused)) => return refused,
    };
    let exec = match executor(&st, node, "logs").await {
        Ok(e) => e,
        Err(r) => return r,
    };
    let mut stream = match exec.logs(&container, tail, follow).await {
        Ok(s) => s,
        Err(e) => return exec_error(e),
    };
    // The engine's refusal (e.g. the container is gone) arrives as the
    // stream's first item: answer it as a status, not as a log line.
    let first = if follow {
        None
    } else {
        match stream.next().await {
            Some(Err(e)) => return exec_error(e),
            other => other,
        }
    };
    let what = format!(
        "machine {} (#{}) of {}: logs, {}{}",
        target.name,
        target.machine_id,
        target.owner,
        tail.map_or_else(|| "all lines".to_string(), |n| format!("last {n} lines")),
        if follow { ", followed" } else { "" }
    );
    let client = crate::http::client_address::of(&parts);
    let user_id = user.id;
    let audit = |bytes: Option<u64>| {
        let pool = st.app.pool.clone();
        let (what, client) = (what.clone(), client.clone());
        async move {
            gantry_platform::audit::access(&pool, Some(user_id), "logs.read", &what, client.as_deref(), bytes).await
        }
    };
    if follow {
        audit(None).await;
        let stopped = st.stopped();
        let stopping = st.stopping.clone();
        // A stream must not outlive the right to it.
        let session = st.session_watch.watch_request(&parts, &user);
        let ended = session.wait();
        let events = lines(stream)
            .take_until(futures_util::future::select(Box::pin(stopped), Box::pin(ended)))
            .map(|line| Ok::<_, Infallible>(Event::default().data(line)))
            .chain(stream::once(async move {
                // Given back when the stream ends or the client leaves.
                let _slot = slot;
                let why = if *stopping.borrow() {
                    "the log stream ended: the server is shutting down".to_string()
                } else if let Some(ended) = session.ended() {
                    format!("the log stream ended: {}; sign in again", ended.what())
                } else {
                    "the log stream ended (the container stopped or was removed)".to_string()
                };
                Ok(Event::default().event("end").data(why))
            }));
        return Sse::new(events).keep_alive(KeepAlive::default()).into_response();
    }
    // A short tail is read here and the engine let go before the client
    // reads a byte: 200 lines can still be megabytes, and a client reading
    // them slowly would hold an engine connection outside every limit.
    // Longer than that, it takes a place as a long one does.
    let mut head: Vec<Result<Bytes, _>> = first.into_iter().collect();
    let mut ended = false;
    if slot.is_none() {
        let mut held: usize = head.iter().map(|r| r.as_ref().map_or(0, Bytes::len)).sum();
        while !ended && held <= SHORT_TAIL_BYTES {
            match stream.next().await {
                Some(item) => {
                    held += item.as_ref().map_or(0, Bytes::len);
                    head.push(item);
                }
                None => ended = true,
            }
        }
        if !ended {
            slot = match take_slot(&st, user.id) {
                Ok(slot) => Some(slot),
                Err(refused) => return refused,
            };
        }
    }
    // Noted before the first byte goes out: with its size when it is all
    // read here.
    let held = ended.then(|| head.iter().map(|r| r.as_ref().map_or(0, |b| b.len() as u64)).sum());
    audit(held).await;
    // Cut when the session ends, as a followed one; the slot (if any) is
    // given back when the body ends or the client leaves.
    let rest = if ended { stream::empty().boxed() } else { st.session_watch.watch_request(&parts, &user).cut(stream) };
    let give_back = stream::once(async move {
        drop(slot);
        None
    })
    .filter_map(std::future::ready);
    let body =
        stream::iter(head).chain(rest).chain(give_back).map(|r| r.map_err(|e| std::io::Error::other(e.to_string())));
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::CACHE_CONTROL, "no-store")],
        Body::from_stream(body),
    )
        .into_response()
}

/// A place under the followed-logs limits (the terminals' numbers), or the
/// refusal to answer.
fn take_slot(st: &WsState, user_id: i64) -> Result<crate::routes::terminal::Slot, Response> {
    st.follow_slots.take(user_id, st.limits.max_terminals, st.limits.max_terminals_per_user).map_err(|full| match full {
        Full::Server(max) => refuse(StatusCode::SERVICE_UNAVAILABLE, format!("this server has {max} followed or whole logs open, its limit; try again later")),
        Full::User(max) => refuse(
            StatusCode::TOO_MANY_REQUESTS,
            format!("you have {max} followed or whole logs open on this server, the limit per user; close one to open another"),
        ),
    })
}

/// Splits a byte stream into lines (without `\n` and `\r`), each at most
/// [`MAX_LINE`] bytes, decoding UTF-8 leniently. An error ends the lines.
pub fn lines(input: ByteStream) -> impl Stream<Item = String> + Send {
    struct St {
        input: ByteStream,
        buf: BytesMut,
        ready: std::collections::VecDeque<String>,
        done: bool,
    }
    let st = St { input, buf: BytesMut::new(), ready: Default::default(), done: false };
    stream::unfold(st, |mut st| async move {
        loop {
            if let Some(line) = st.ready.pop_front() {
                return Some((line, st));
            }
            if st.done {
                return None;
            }
            match st.input.next().await {
                Some(Ok(chunk)) => split_into(&mut st.buf, chunk, &mut st.ready),
                Some(Err(_)) | None => {
                    st.done = true;
                    if !st.buf.is_empty() {
                        let rest = st.buf.split();
                        st.ready.push_back(clean(&rest));
                    }
                }
            }
        }
    })
}

fn split_into(buf: &mut BytesMut, chunk: Bytes, out: &mut std::collections::VecDeque<String>) {
    let mut chunk = &chunk[..];
    while !chunk.is_empty() {
        match chunk.iter().position(|b| *b == b'\n') {
            Some(pos) if buf.len() + pos <= MAX_LINE => {
                buf.extend_from_slice(&chunk[..pos]);
                let line = buf.split();
                out.push_back(clean(&line));
                chunk = &chunk[pos + 1..];
            }
            _ => {
                let room = MAX_LINE - buf.len();
                let take = room.min(chunk.len());
                buf.extend_from_slice(&chunk[..take]);
                chunk = &chunk[take..];
                if buf.len() >= MAX_LINE {
                    let line = buf.split();
                    out.push_back(clean(&line));
                }
            }
        }
    }
}

fn clean(line: &[u8]) -> String {
    String::from_utf8_lossy(line).replace('\r', "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_platform::executor::ExecError;

    gantry_testkit::timed_test! {
        async fn lines_across_chunks_and_long_lines_split() {
            let long = "x".repeat(MAX_LINE + 10);
            let parts: Vec<Result<Bytes, ExecError>> = vec![
                Ok(Bytes::from_static(b"one\r\ntw")),
                Ok(Bytes::from_static(b"o\n")),
                Ok(Bytes::from(format!("{long}\nlast"))),
            ];
            let got: Vec<String> = lines(stream::iter(parts).boxed()).collect().await;
            assert_eq!(got, vec!["one".to_string(), "two".into(), "x".repeat(MAX_LINE), "x".repeat(10), "last".into()]);
        }
    }
}
