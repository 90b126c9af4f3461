//! Request guards that run before any page or server function: who is
//! signed in, pages that need an account, admin pages, foreign origins.

use app::state::{AppState, RequestUser, SESSION_USER_KEY};
use axum::{
    extract::{Request, State},
    http::{header, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use gantry_platform::accounts;
use tower_sessions::Session;

/// Looks up the session's account once per request and leaves it in the
/// request's extensions for pages and server functions.
pub async fn resolve_user(State(state): State<AppState>, session: Session, mut req: Request, next: Next) -> Response {
    let user = if is_asset(req.uri().path()) {
        None
    } else {
        match session.get::<i64>(SESSION_USER_KEY).await {
            Ok(Some(id)) => accounts::user_by_id(&state.pool, id).await.ok().flatten(),
            _ => None,
        }
    };
    req.extensions_mut().insert(RequestUser(user));
    next.run(req).await
}

/// Anonymous visitors to a page are sent to the sign-in page; signed-in
/// non-admins get 403 on admin pages (the page itself says why).
pub async fn guard_pages(req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if req.method() != Method::GET || path == "/login" || path.starts_with("/api/") || is_asset(&path) || path == "/healthz" {
        return next.run(req).await;
    }
    let user = req.extensions().get::<RequestUser>().and_then(|u| u.0.clone());
    let Some(user) = user else {
        let target = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
        return Redirect::to(&format!("/login?next={}", encode_query_value(target))).into_response();
    };
    let admin_page = path == "/admin" || path.starts_with("/admin/");
    let mut res = next.run(req).await;
    if admin_page && !user.role.is_admin() {
        *res.status_mut() = StatusCode::FORBIDDEN;
    }
    res
}

/// Refuses state-changing requests that a browser sent from another site.
/// Browsers always send `Origin` on cross-site POSTs; it must name this
/// host (or the configured public origin).
pub async fn same_origin(State(public_origin): State<Option<String>>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    if origin_allowed(req.headers(), public_origin.as_deref()) {
        next.run(req).await
    } else {
        (StatusCode::FORBIDDEN, "cross-origin request refused").into_response()
    }
}

/// The Origin rule itself; the terminal's WebSocket upgrade (a GET) checks
/// it too.
pub fn origin_allowed(headers: &axum::http::HeaderMap, public_origin: Option<&str>) -> bool {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        Some(origin) => {
            let authority = origin.split_once("://").map(|(_, a)| a);
            (host.is_some() && authority == host) || public_origin == Some(origin)
        }
        // No Origin: not a browser, or a same-origin navigation in an old
        // browser. Fetch metadata, where present, still tells cross-site.
        None => headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) != Some("cross-site"),
    }
}

/// Files (anything whose last path segment has a dot) are public assets.
pub fn is_asset(path: &str) -> bool {
    path.starts_with("/pkg/") || path.rsplit('/').next().is_some_and(|seg| seg.contains('.'))
}

/// Percent-encodes a query value, keeping `/` readable.
pub(crate) fn encode_query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_files_pages_are_not() {
        assert!(is_asset("/pkg/gantry.js"));
        assert!(is_asset("/favicon.svg"));
        assert!(!is_asset("/admin/groups"));
        assert!(!is_asset("/"));
    }

    #[test]
    fn next_is_query_encoded() {
        assert_eq!(encode_query_value("/admin?x=1&y=2"), "/admin%3Fx%3D1%26y%3D2");
    }
}
