//! Rendered pages kept while nothing they show can have changed.
//!
//! A page is rendered from the database (and the clock), and most requests
//! for it — a tab's refresh every few seconds, the same list opened again —
//! find the database as it was. So a rendered page is kept with the
//! database's data version read before its render
//! (`gantry_platform::db_version`: it changes with every commit by any
//! connection of any process) and served again while the version is the
//! same **and** the page is under `--page-cache-ms` old (a second): the
//! version covers every change to the database, the age what else a page
//! shows (relative times, a running task's output read from its engine).
//!
//! Kept per session and address (path and query), after the sign-in checks
//! have run (`resolve_user`, `guard_pages` sit outside this layer), so a
//! page is only ever served to the session it was rendered for, and one
//! whose account was disabled or signed out meanwhile never gets past them.
//! The version a page is kept under is read before the account is
//! ([`read_version_first`], outside `resolve_user`): a change to the
//! account (its group, its role) committed between the two would otherwise
//! be inside the version while the page shows the account as it was.
//! The CSP nonce, different on every response, is put back fresh. Kept:
//! only `200 text/html` answers to `GET` that did not meet an internal
//! error ([`NOT_KEPT`]). While one request renders a page, the others for
//! it wait for that render (`kept.rs`).

mod kept;
mod tee;
#[cfg(test)]
mod tests;

pub use kept::{PageCache, VersionSource};

use crate::http::headers::CspNonce;
use app::state::RequestUser;
use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{header, HeaderName, Method, StatusCode},
    middleware::Next,
    response::Response,
};
use kept::{Key, Lookup, Page};
use std::time::{Duration, Instant};
use tee::Tee;

/// Set by a render that met an internal error (`AppError::internal`): its
/// page names a request id and is not to be shown again. The header layer
/// removes it from every answer (`security_headers`).
pub const NOT_KEPT: HeaderName = HeaderName::from_static(app::error::NOT_KEPT_HEADER);
/// How long a request waits for another's render of its page before it
/// renders the page itself.
const WAIT_FOR_RENDER: Duration = Duration::from_secs(10);

/// The data version as a request arrived: read by [`read_version_first`]
/// before the session and its account are, `None` if it could not be read.
#[derive(Clone, Copy, Debug)]
pub struct VersionAtArrival(pub Option<i64>);

/// The outer half of the page cache, layered outside `resolve_user`: reads
/// the data version before the signed-in account is looked up, for
/// [`keep_pages`]. Only `GET`s that may be pages (no asset, no `/api/`);
/// with no cache (`--page-cache-ms 0`), nothing.
pub async fn read_version_first(State(cache): State<Option<PageCache>>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let page = req.method() == Method::GET && !path.starts_with("/api/") && !crate::http::guard::is_asset(path);
    if let Some(cache) = cache.filter(|_| page) {
        let at_arrival = (cache.version)().await;
        req.extensions_mut().insert(VersionAtArrival(at_arrival));
    }
    next.run(req).await
}

/// The layer: serves a kept page, or renders and keeps it. The version is
/// the one [`read_version_first`] read before the account was resolved;
/// a request without it is rendered and not kept.
pub async fn keep_pages(State(cache): State<PageCache>, req: Request, next: Next) -> Response {
    let nonce = req.extensions().get::<CspNonce>().map(|n| n.0.clone());
    let (Some(nonce), true) = (nonce, req.method() == Method::GET) else {
        return next.run(req).await;
    };
    // Read before the account and before rendering: a commit during
    // either moves the version past this, and the page is not served again.
    let Some(VersionAtArrival(Some(version))) = req.extensions().get::<VersionAtArrival>().copied() else {
        return next.run(req).await;
    };
    let key = Key {
        session: req.extensions().get::<tower_sessions::Session>().and_then(|s| s.id()).map(|id| id.to_string()),
        user: req.extensions().get::<RequestUser>().and_then(|u| u.0.as_ref().map(|u| u.id)),
        uri: req.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default(),
        html: req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html")),
    };
    let at = Instant::now();
    let ticket = match cache.lookup(&key, version, at, &nonce) {
        Lookup::Kept(res) => return res,
        Lookup::Render(ticket) => Some(ticket),
        Lookup::Wait(mut done) => {
            // Woken when that render is kept or given up (its ticket dropped).
            let _ = tokio::time::timeout(WAIT_FOR_RENDER, done.changed()).await;
            if let Some(res) = cache.current(&key, version, at, &nonce) {
                return res;
            }
            None
        }
    };
    let res = next.run(req).await;
    // Nothing that sets a cookie: a kept answer must not set it again.
    let keepable = res.status() == StatusCode::OK
        && !res.headers().contains_key(NOT_KEPT)
        && !res.headers().contains_key(header::SET_COOKIE)
        && res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/html"));
    if !keepable {
        return res;
    }
    let (parts, body) = res.into_parts();
    let headers = parts.headers.clone();
    let done = move |body: Vec<Bytes>| {
        let body: Vec<u8> = body.concat();
        // The nonce is fresh randomness: it appears only where the render put it.
        if let Ok(text) = std::str::from_utf8(&body) {
            let pieces = text.split(nonce.as_str()).map(|p| Bytes::copy_from_slice(p.as_bytes())).collect();
            cache.keep(key, Page { version, at, headers, pieces, len: body.len() });
        }
        drop(ticket);
    };
    Response::from_parts(parts, Body::from_stream(Tee::new(body.into_data_stream(), Box::new(done))))
}
