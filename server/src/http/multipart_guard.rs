//! Limits on a multipart form's framing, for the routes that take large
//! uploads as forms (their body limit is off: files are streamed, many GB).
//!
//! axum's [`Multipart`] hands the body to multer, which buffers everything
//! until it finds the first `--boundary`, and each part's header block
//! until its `\r\n\r\n`: without a limit, a body that never brings them is
//! held in memory until the process dies. [`multipart`] wraps the body
//! first in a stream that follows the framing as multer reads it and fails
//! (so multer fails, and the route can answer 400 with [`Tripped`]'s
//! reason) when
//!
//! - more than [`Limits::framing`] bytes come before the first boundary,
//! - more than that come between a boundary and the end of its part's
//!   headers, or
//! - no byte arrives for [`Limits::idle`] while the route waits for one.
//!
//! A part's contents are not limited here: they are streamed, and each
//! route bounds what it keeps of them.

use axum::{
    body::{Body, Bytes},
    extract::{multipart::MultipartRejection, FromRequest, Multipart, Request},
    http::header::CONTENT_TYPE,
    BoxError,
};
use futures_util::Stream;
use memchr::memmem::Finder;
use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

/// Most bytes before the first boundary, and from a boundary to the end
/// of its part's headers.
pub const FRAMING_LIMIT: usize = 64 * 1024;

/// How long the body may bring nothing while the route waits for it: the
/// same as a dataset upload's body (`gantry_platform`'s `BODY_IDLE`).
pub const IDLE: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub framing: usize,
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { framing: FRAMING_LIMIT, idle: IDLE }
    }
}

/// Why a guarded body was cut.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("not a form upload: more than {0} bytes before the form's first boundary")]
    Preamble(usize),
    #[error("not a form upload: a part's headers are longer than {0} bytes")]
    Headers(usize),
    #[error("not a form upload: a boundary line is malformed")]
    Malformed,
    #[error("the upload stopped: no data arrived for {0:?}")]
    Idle(Duration),
}

/// Where the guard's reason lands when it cuts the body; the route reads
/// it after multer's (less telling) error.
#[derive(Clone, Debug, Default)]
pub struct Tripped(Arc<Mutex<Option<Refused>>>);

impl Tripped {
    /// The reason the body was cut, if it was.
    pub fn reason(&self) -> Option<Refused> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, why: Refused) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
}

/// The request's form, its body guarded. A request that is not a
/// multipart form (no boundary) goes as it is: `Multipart` refuses it
/// without reading the body.
pub async fn multipart<S: Send + Sync>(
    req: Request,
    state: &S,
    limits: Limits,
) -> Result<(Multipart, Tripped), MultipartRejection> {
    let (req, tripped) = guard(req, limits);
    let form = Multipart::from_request(req, state).await?;
    Ok((form, tripped))
}

/// The request with its body guarded (see the module's text).
pub fn guard(req: Request, limits: Limits) -> (Request, Tripped) {
    let tripped = Tripped::default();
    // The boundary exactly as axum finds it for multer.
    let boundary =
        req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).and_then(|ct| multer::parse_boundary(ct).ok());
    let Some(boundary) = boundary else {
        return (req, tripped);
    };
    let (parts, body) = req.into_parts();
    let guarded = Guarded::new(body.into_data_stream(), &boundary, limits, tripped.clone());
    (Request::from_parts(parts, Body::from_stream(guarded)), tripped)
}

/// The body stream, fed through a [`Scanner`], with an idle timeout.
pub struct Guarded<S> {
    inner: S,
    scanner: Scanner,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The timer runs for the current wait (reset when a wait begins, so
    /// time the route spends on a chunk does not count).
    waiting: bool,
    tripped: Tripped,
    ended: bool,
}

impl<S> Guarded<S> {
    pub fn new(inner: S, boundary: &str, limits: Limits, tripped: Tripped) -> Self {
        Guarded {
            inner,
            scanner: Scanner::new(boundary, limits.framing),
            idle: limits.idle,
            timer: Box::pin(tokio::time::sleep(limits.idle)),
            waiting: false,
            tripped,
            ended: false,
        }
    }

    fn trip(&mut self, why: Refused) -> Poll<Option<Result<Bytes, BoxError>>> {
        self.ended = true;
        self.tripped.set(why.clone());
        Poll::Ready(Some(Err(why.into())))
    }
}

impl<S, E> Stream for Guarded<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Into<BoxError>,
{
    type Item = Result<Bytes, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if !this.waiting {
            let deadline = tokio::time::Instant::now() + this.idle;
            this.timer.as_mut().reset(deadline);
            this.waiting = true;
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(bytes))) => {
                this.waiting = false;
                match this.scanner.feed(&bytes) {
                    Ok(()) => Poll::Ready(Some(Ok(bytes))),
                    Err(why) => this.trip(why),
                }
            }
            Poll::Ready(Some(Err(e))) => {
                this.ended = true;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                this.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => this.trip(Refused::Idle(this.idle)),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// Where the scanner is in the form, stage for stage as multer 3 reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Before the first `--boundary` (found anywhere, as multer does).
    Preamble,
    /// Just after a `--boundary`: `--` ends the form.
    Kind,
    /// `-` after the boundary: the second must be `-` too.
    KindDash,
    /// Spaces and tabs, then the line's `\r`.
    Padding,
    /// The line's `\n`.
    LineFeed,
    /// The part's headers, up to `\r\n\r\n`.
    Headers,
    /// The part's contents, up to `\r\n--boundary` (not limited).
    Data,
    /// After the closing boundary: multer reads no further.
    Done,
}

/// Follows a multipart body's framing chunk by chunk and refuses it when
/// the preamble or a header block runs past the limit. Patterns split
/// across chunks are found: each searching stage keeps its last bytes
/// that begin its pattern (at most pattern-length-1).
pub struct Scanner {
    first: Finder<'static>,
    delimiter: Finder<'static>,
    headers_end: Finder<'static>,
    stage: Stage,
    /// The current stage's last bytes that begin its pattern (fewer than
    /// the pattern's length).
    carry: Vec<u8>,
    window: Vec<u8>,
    /// Bytes the current limited region has had so far.
    counted: usize,
    limit: usize,
}

impl Scanner {
    pub fn new(boundary: &str, limit: usize) -> Self {
        Scanner {
            first: Finder::new(format!("--{boundary}").as_bytes()).into_owned(),
            delimiter: Finder::new(format!("\r\n--{boundary}").as_bytes()).into_owned(),
            headers_end: Finder::new(b"\r\n\r\n").into_owned(),
            stage: Stage::Preamble,
            carry: Vec::new(),
            window: Vec::new(),
            counted: 0,
            limit,
        }
    }

    /// Takes the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Refused> {
        let mut rest = chunk;
        while !rest.is_empty() {
            match self.stage {
                Stage::Done => return Ok(()),
                Stage::Preamble | Stage::Headers | Stage::Data => {
                    let stage = self.stage;
                    let finder = match stage {
                        Stage::Preamble => &self.first,
                        Stage::Headers => &self.headers_end,
                        _ => &self.delimiter,
                    };
                    let n = finder.needle().len();
                    match find(finder, &mut self.carry, &mut self.window, rest) {
                        Some(end) => {
                            // Bytes of the region before the pattern began.
                            if stage != Stage::Data && self.counted + end - n > self.limit {
                                return Err(self.refusal(stage));
                            }
                            rest = &rest[end..];
                            self.counted = 0;
                            self.stage = match stage {
                                Stage::Headers => Stage::Data,
                                _ => Stage::Kind,
                            };
                        }
                        None => {
                            if stage != Stage::Data {
                                self.counted += rest.len();
                                // The carried bytes may yet begin the pattern.
                                if self.counted - self.carry.len() > self.limit {
                                    return Err(self.refusal(stage));
                                }
                            }
                            rest = &[];
                        }
                    }
                }
                Stage::Kind | Stage::KindDash | Stage::Padding | Stage::LineFeed => {
                    let byte = rest[0];
                    rest = &rest[1..];
                    self.counted += 1;
                    if self.counted > self.limit {
                        return Err(Refused::Headers(self.limit));
                    }
                    self.stage = match (self.stage, byte) {
                        (Stage::Kind, b'-') => Stage::KindDash,
                        (Stage::KindDash, b'-') => Stage::Done,
                        (Stage::KindDash, _) => return Err(Refused::Malformed),
                        (Stage::Kind | Stage::Padding, b' ' | b'\t') => Stage::Padding,
                        (Stage::Kind | Stage::Padding, b'\r') => Stage::LineFeed,
                        (Stage::LineFeed, b'\n') => {
                            // The header block is what follows the line
                            // (multer looks for its end only from here).
                            self.carry.clear();
                            Stage::Headers
                        }
                        _ => return Err(Refused::Malformed),
                    };
                }
            }
        }
        Ok(())
    }

    fn refusal(&self, stage: Stage) -> Refused {
        match stage {
            Stage::Preamble => Refused::Preamble(self.limit),
            _ => Refused::Headers(self.limit),
        }
    }
}

/// Finds `finder`'s pattern in `carry` (the stage's last bytes, fewer than
/// the pattern's) followed by `rest`: the index in `rest` just past the
/// first match, the carry cleared; or None, the carry now the longest
/// tail of what was seen that begins the pattern.
fn find(finder: &Finder<'_>, carry: &mut Vec<u8>, window: &mut Vec<u8>, rest: &[u8]) -> Option<usize> {
    let n = finder.needle().len();
    if !carry.is_empty() {
        // A match that begins in the carry ends in rest's first n-1 bytes.
        window.clear();
        window.extend_from_slice(carry);
        window.extend_from_slice(&rest[..rest.len().min(n - 1)]);
        if let Some(at) = finder.find(window) {
            let end = at + n - carry.len();
            carry.clear();
            return Some(end);
        }
    }
    if let Some(at) = finder.find(rest) {
        carry.clear();
        return Some(at + n);
    }
    if rest.len() >= n - 1 {
        carry.clear();
        carry.extend_from_slice(&rest[rest.len() - (n - 1)..]);
    } else {
        carry.extend_from_slice(rest);
        let excess = carry.len().saturating_sub(n - 1);
        carry.drain(..excess);
    }
    // Only a tail that begins the pattern may begin a match.
    let needle = finder.needle();
    let keep = (0..=carry.len()).rev().find(|&k| carry[carry.len() - k..] == needle[..k]).unwrap_or(0);
    carry.drain(..carry.len() - keep);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::{stream, StreamExt};

    const B: &str = "XyZ";

    fn form() -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(
            format!("--{B}\r\nContent-Disposition: form-data; name=\"replace\"\r\n\r\non\r\n").as_bytes(),
        );
        f.extend_from_slice(format!("--{B}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes());
        // Contents that look like framing but are not a delimiter.
        f.extend_from_slice(b"\r\n\r\n--XyQ\r\n--");
        f.extend(std::iter::repeat_n(0u8, 300_000));
        f.extend_from_slice(format!("\r\n--{B}--\r\n").as_bytes());
        f
    }

    /// Feeds `data` in chunks of `size`; the first refusal, if any.
    fn scan(data: &[u8], size: usize, limit: usize) -> Result<Stage, Refused> {
        let mut s = Scanner::new(B, limit);
        for chunk in data.chunks(size) {
            s.feed(chunk)?;
        }
        Ok(s.stage)
    }

    #[test]
    fn a_normal_form_passes_in_any_chunking() {
        let f = form();
        for size in [1, 2, 3, 4, 5, 7, 64, 1000, 65_536, f.len()] {
            assert_eq!(scan(&f, size, 200), Ok(Stage::Done), "chunks of {size}");
        }
    }

    #[test]
    fn the_preamble_is_limited_exactly() {
        for size in [1, 2, 3, 5, 4096] {
            // `limit` bytes before the boundary pass, one more does not,
            // whether or not the boundary has come yet.
            let mut ok = vec![b'-'; 100];
            ok.extend_from_slice(format!("--{B}\r\n").as_bytes());
            assert_eq!(scan(&ok, size, 100), Ok(Stage::Headers), "chunks of {size}");
            let mut over = vec![b'-'; 101];
            over.extend_from_slice(format!("--{B}\r\n").as_bytes());
            assert_eq!(scan(&over, size, 100), Err(Refused::Preamble(100)), "chunks of {size}");
            assert_eq!(scan(&[0u8; 102], size, 100), Err(Refused::Preamble(100)), "chunks of {size}");
            // 100 bytes and the boundary's start: not refused yet.
            let mut open = vec![0u8; 100];
            open.extend_from_slice(b"--Xy");
            assert_eq!(scan(&open, size, 100), Ok(Stage::Preamble), "chunks of {size}");
        }
    }

    #[test]
    fn a_header_block_is_limited_exactly() {
        // From the boundary's end to the `\r\n\r\n`: "\r\n" + header bytes.
        let part = |len: usize| {
            let mut p = format!("--{B}\r\n").into_bytes();
            p.extend(std::iter::repeat_n(b'h', len - 2));
            p.extend_from_slice(b"\r\n\r\nbody");
            p
        };
        for size in [1, 2, 3, 5, 4096] {
            assert_eq!(scan(&part(100), size, 100), Ok(Stage::Data), "chunks of {size}");
            assert_eq!(scan(&part(101), size, 100), Err(Refused::Headers(100)), "chunks of {size}");
            let mut endless = format!("--{B}\r\n").into_bytes();
            endless.extend(std::iter::repeat_n(b'h', 1000));
            assert_eq!(scan(&endless, size, 100), Err(Refused::Headers(100)), "chunks of {size}");
            // Endless padding after a boundary counts too.
            let mut padded = format!("--{B}").into_bytes();
            padded.extend(std::iter::repeat_n(b' ', 1000));
            assert_eq!(scan(&padded, size, 100), Err(Refused::Headers(100)), "chunks of {size}");
        }
    }

    #[test]
    fn any_split_of_a_body_scans_as_the_whole_does() {
        // Bodies from an alphabet that makes framing (and near misses,
        // overlapping ones) likely: every chunking agrees with one chunk.
        let tokens: [&[u8]; 9] = [b"--XyZ", b"\r\n", b"\r\n\r\n", b" ", b"\t", b"-", b"--", b"X", b"a"];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut outcomes = std::collections::HashSet::new();
        for _ in 0..2000 {
            let mut body = Vec::new();
            for _ in 0..4 + seed % 30 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                body.extend_from_slice(tokens[(seed % tokens.len() as u64) as usize]);
            }
            let whole = scan(&body, body.len(), 12);
            for size in 1..8 {
                assert_eq!(scan(&body, size, 12), whole, "{:?} in chunks of {size}", String::from_utf8_lossy(&body));
            }
            outcomes.insert(format!("{whole:?}"));
        }
        // Every stage and refusal came up.
        assert!(outcomes.len() >= 10, "{outcomes:?}");
    }

    #[test]
    fn the_header_end_is_looked_for_after_the_boundary_line_as_multer_does() {
        // "--B\r\n\r\n": multer takes the first CRLF as the boundary line's
        // and looks for "\r\n\r\n" after it, so the block is still open.
        let mut f = format!("--{B}  \r\n\r\n").into_bytes();
        f.extend(std::iter::repeat_n(b'x', 200));
        assert_eq!(scan(&f, 7, 100), Err(Refused::Headers(100)));
    }

    #[test]
    fn contents_are_not_limited_and_framing_errors_are_refused() {
        let mut f = format!("--{B}\r\nA: b\r\n\r\n").into_bytes();
        f.extend(std::iter::repeat_n(0u8, 1 << 20));
        assert_eq!(scan(&f, 8192, 100), Ok(Stage::Data));
        assert_eq!(scan(format!("--{B}-x").as_bytes(), 1, 100), Err(Refused::Malformed));
        assert_eq!(scan(format!("--{B}x\r\n").as_bytes(), 1, 100), Err(Refused::Malformed));
        assert_eq!(scan(format!("--{B} \rx").as_bytes(), 1, 100), Err(Refused::Malformed));
        // After the closing boundary, nothing is looked at.
        let mut end = format!("--{B}--").into_bytes();
        end.extend(std::iter::repeat_n(b'z', 1000));
        assert_eq!(scan(&end, 3, 100), Ok(Stage::Done));
    }

    gantry_testkit::timed_test! {
        async fn the_stream_passes_a_form_through_byte_for_byte() {
            let f = form();
            let chunks: Vec<Result<Bytes, std::io::Error>> = f.chunks(777).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
            let tripped = Tripped::default();
            let guarded = Guarded::new(stream::iter(chunks), B, Limits { framing: 200, idle: Duration::from_secs(5) }, tripped.clone());
            let out: Vec<Bytes> = guarded.map(|r| r.unwrap()).collect().await;
            assert_eq!(out.concat(), f);
            assert_eq!(tripped.reason(), None);
        }
    }

    gantry_testkit::timed_test! {
        async fn the_stream_ends_with_the_reason_when_refused() {
            let zeros = stream::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from_static(&[0u8; 1000])));
            let tripped = Tripped::default();
            let mut guarded = Guarded::new(zeros, B, Limits { framing: 4096, idle: Duration::from_secs(5) }, tripped.clone());
            let mut passed = 0;
            let err = loop {
                match guarded.next().await.unwrap() {
                    Ok(b) => passed += b.len(),
                    Err(e) => break e,
                }
            };
            assert_eq!(passed, 4000);
            assert_eq!(err.to_string(), Refused::Preamble(4096).to_string());
            assert_eq!(tripped.reason(), Some(Refused::Preamble(4096)));
            assert!(guarded.next().await.is_none());
        }
    }

    gantry_testkit::timed_test! {
        async fn a_silent_body_is_cut_after_the_idle_time() {
            let start = format!("--{B}\r\n");
            let silent = stream::iter([Ok::<_, std::io::Error>(Bytes::from(start))]).chain(stream::pending());
            let tripped = Tripped::default();
            let mut guarded = Guarded::new(silent, B, Limits { framing: 100, idle: Duration::from_millis(200) }, tripped.clone());
            assert!(guarded.next().await.unwrap().is_ok());
            let began = std::time::Instant::now();
            assert!(guarded.next().await.unwrap().is_err());
            assert!(began.elapsed() >= Duration::from_millis(200));
            assert_eq!(tripped.reason(), Some(Refused::Idle(Duration::from_millis(200))));
        }
    }

    gantry_testkit::timed_test! {
        async fn time_the_route_spends_on_a_chunk_is_not_idle_time() {
            let chunks = [format!("--{B}\r\n"), "A: b\r\n\r\n".to_string()].map(|c| Ok::<_, std::io::Error>(Bytes::from(c)));
            let mut guarded = Guarded::new(stream::iter(chunks), B, Limits { framing: 100, idle: Duration::from_millis(100) }, Tripped::default());
            assert!(guarded.next().await.unwrap().is_ok());
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(guarded.next().await.unwrap().is_ok());
            assert!(guarded.next().await.is_none());
        }
    }
}
