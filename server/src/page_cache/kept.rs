//! The kept pages, and the renders under way: when a page has to be
//! rendered again (a commit, its age), the requests for it that arrive
//! meanwhile wait for that one render instead of each rendering it — 64
//! clients polling one page would otherwise render it 64 times at once
//! after every commit.

use axum::{
    body::{Body, Bytes},
    http::HeaderMap,
    response::Response,
};
use futures_util::future::BoxFuture;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};
use tokio::sync::watch;

/// A page over this size is not kept (a list is paged well below it).
pub(super) const MAX_PAGE_BYTES: usize = 1 << 20;
/// What all kept pages may take together, and how many there may be.
const MAX_BYTES: usize = 64 << 20;
const MAX_PAGES: usize = 4096;

#[derive(Clone)]
pub struct PageCache {
    kept: Arc<Mutex<Kept>>,
    pub(super) max_age: Duration,
    /// The database's data version (`db_version`; tests count their own);
    /// `None` when it cannot be read — then nothing is served again.
    pub(super) version: VersionSource,
}

pub type VersionSource = Arc<dyn Fn() -> BoxFuture<'static, Option<i64>> + Send + Sync>;

#[derive(Default)]
struct Kept {
    pages: HashMap<Key, Page>,
    bytes: usize,
    rendering: HashMap<Key, Rendering>,
    tickets: u64,
}

#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub session: Option<String>,
    pub user: Option<i64>,
    pub uri: String,
    /// A render reads one request header: whether `Accept` names HTML
    /// (a browser gets a refusal as a page, other clients its status).
    pub html: bool,
}

pub(super) struct Page {
    pub version: i64,
    pub at: Instant,
    pub headers: HeaderMap,
    /// The body split where the nonce stood.
    pub pieces: Vec<Bytes>,
    pub len: usize,
}

struct Rendering {
    version: i64,
    ticket: u64,
    /// Dropped with this entry: its receivers (the waiters) wake.
    done: watch::Sender<()>,
}

pub(super) enum Lookup {
    /// The kept page, with this request's nonce.
    Kept(Response),
    /// Another request is rendering it: wait until that one is done.
    Wait(watch::Receiver<()>),
    /// Render it; the ticket says so to those who come meanwhile until it
    /// is dropped (the page kept, or not to be kept).
    Render(Ticket),
}

pub(super) struct Ticket {
    cache: PageCache,
    key: Key,
    number: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut kept = self.cache.lock();
        // Unless a render for a later commit took the place meanwhile;
        // either way the waiters wake (their sender drops) and look again.
        if kept.rendering.get(&self.key).is_some_and(|r| r.ticket == self.number) {
            kept.rendering.remove(&self.key);
        }
    }
}

impl PageCache {
    pub fn new(max_age: Duration, version: VersionSource) -> Self {
        PageCache { kept: Arc::default(), max_age, version }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The page for `key` if it is still current, else who renders it.
    pub(super) fn lookup(&self, key: &Key, version: i64, now: Instant, nonce: &str) -> Lookup {
        if let Some(res) = self.current(key, version, now, nonce) {
            return Lookup::Kept(res);
        }
        let mut kept = self.lock();
        if let Some(r) = kept.rendering.get(key).filter(|r| r.version == version) {
            return Lookup::Wait(r.done.subscribe());
        }
        kept.tickets += 1;
        let number = kept.tickets;
        kept.rendering.insert(key.clone(), Rendering { version, ticket: number, done: watch::Sender::new(()) });
        Lookup::Render(Ticket { cache: self.clone(), key: key.clone(), number })
    }

    /// How many requests wait for the render of `key` under way.
    #[cfg(test)]
    pub(super) fn waiting(&self, key: &Key) -> usize {
        self.lock().rendering.get(key).map_or(0, |r| r.done.receiver_count())
    }

    /// The page for `key` if it is still current.
    pub(super) fn current(&self, key: &Key, version: i64, now: Instant, nonce: &str) -> Option<Response> {
        let (headers, pieces, len) = {
            let kept = self.lock();
            let page = kept
                .pages
                .get(key)
                .filter(|p| p.version == version && now.saturating_duration_since(p.at) < self.max_age)?;
            (page.headers.clone(), page.pieces.clone(), page.len)
        };
        let mut body = Vec::with_capacity(len + pieces.len() * nonce.len());
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                body.extend_from_slice(nonce.as_bytes());
            }
            body.extend_from_slice(piece);
        }
        let mut res = Response::new(Body::from(body));
        *res.headers_mut() = headers;
        Some(res)
    }

    pub(super) fn keep(&self, key: Key, page: Page) {
        let mut kept = self.lock();
        // A slow render finishing after a newer one keeps the newer (the
        // version only grows).
        if kept.pages.get(&key).is_some_and(|old| old.version > page.version) {
            return;
        }
        if let Some(old) = kept.pages.remove(&key) {
            kept.bytes -= old.len;
        }
        if kept.pages.len() >= MAX_PAGES || kept.bytes + page.len > MAX_BYTES {
            kept.make_room(page.version, self.max_age, page.len);
        }
        kept.bytes += page.len;
        kept.pages.insert(key, page);
    }
}

impl Kept {
    /// Drops every page that can no longer be served (rendered before the
    /// newest version seen, or too old), then the oldest until `len` more
    /// bytes fit.
    fn make_room(&mut self, version: i64, max_age: Duration, len: usize) {
        let now = Instant::now();
        let newest = self.pages.values().map(|p| p.version).fold(version, i64::max);
        self.pages.retain(|_, p| p.version == newest && now.saturating_duration_since(p.at) < max_age);
        self.bytes = self.pages.values().map(|p| p.len).sum();
        let mut by_age: Vec<(Instant, Key)> = self.pages.iter().map(|(k, p)| (p.at, k.clone())).collect();
        by_age.sort_by_key(|(at, _)| *at);
        let mut oldest = by_age.into_iter();
        while self.pages.len() >= MAX_PAGES || self.bytes + len > MAX_BYTES {
            let Some((_, key)) = oldest.next() else { break };
            if let Some(p) = self.pages.remove(&key) {
                self.bytes -= p.len;
            }
        }
    }
}
