//! Request guards that run before any page or server function: who is
//! signed in, pages that need an account, admin pages, foreign origins.

use crate::security::Security;
use app::{
    api::auth::{ClientAddress, SESSION_GEN_KEY, SESSION_SEEN_KEY},
    state::{AppState, RequestUser, SESSION_USER_KEY},
};
use axum::{
    extract::{ConnectInfo, Request, State},
    http::{header, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use gantry_platform::accounts::{self, User};
use std::net::SocketAddr;
use tower_sessions::Session;

/// What the account guard needs: the app's state and the security settings.
#[derive(Clone)]
pub struct Guard {
    pub state: AppState,
    pub security: Security,
}

/// Looks up the session's account once per request and leaves it in the
/// request's extensions for pages and server functions, with the client's
/// address (see `--trusted-proxy`), the argon2 gate for sign-ins, the
/// lifetime of a new API token and the API's per-token rate limiter.
pub async fn resolve_user(State(g): State<Guard>, session: Session, mut req: Request, next: Next) -> Response {
    let user = if is_asset(req.uri().path()) { None } else { session_user(&g, &session).await };
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_string());
    // Every line: a proxy may append its own after the client's (an
    // unreadable line reads as empty, so it can never promote an earlier one).
    let forwarded = req.headers().get_all("x-forwarded-for").iter().map(|v| v.to_str().unwrap_or(""));
    let address = peer.map(|p| crate::http::client_address::client_address(&p, forwarded, g.security.trusted_proxy));
    req.extensions_mut().insert(ClientAddress(address));
    req.extensions_mut().insert(g.security.gate.clone());
    req.extensions_mut().insert(g.security.token_lifetime);
    req.extensions_mut().insert(g.security.api_limiter.clone());
    req.extensions_mut().insert(RequestUser(user));
    next.run(req).await
}

/// The session's account, if the session is still good: used within the
/// idle limit, made in the account's current session generation (disable,
/// demotion and password changes start a new one), account enabled, not
/// signed out (see `accounts::note_signed_out`). A bad
/// session is emptied, which also removes its cookie. Its last-seen time is
/// renewed at most every `renew_after_secs`.
async fn session_user(g: &Guard, session: &Session) -> Option<User> {
    // Before the session is read: a session renewed by a parallel request
    // just after a read must not be judged on its old stamp at a later time.
    let now = g.security.clock.now();
    let id = session.get::<i64>(SESSION_USER_KEY).await.ok().flatten()?;
    let seen = session.get::<i64>(SESSION_SEEN_KEY).await.ok().flatten();
    let gen = session.get::<i64>(SESSION_GEN_KEY).await.ok().flatten().unwrap_or(0);
    let idle = seen.is_some_and(|s| now - s > g.security.session_idle_secs);
    let user = if idle {
        None
    } else {
        // A database failure is not a verdict on the session: keep it. A
        // session signed out (and saved again by a request that was still
        // running) has no account.
        let sid = session.id().map(|s| s.to_string()).unwrap_or_default();
        accounts::user_for_session(&g.state.pool, id, &sid).await.ok()?
    };
    match user {
        Some(u) if !u.disabled && u.session_gen == gen => {
            if seen.is_none_or(|s| now - s >= g.security.renew_after_secs()) {
                let _ = session.insert(SESSION_SEEN_KEY, now).await;
            }
            Some(u)
        }
        _ => {
            let _ = session.flush().await;
            None
        }
    }
}

/// Where an account with a temporary password must go first.
pub const CHANGE_PASSWORD_PAGE: &str = "/account/password";
const OPEN_TO_TEMPORARY: [&str; 5] =
    [CHANGE_PASSWORD_PAGE, "/api/change_password", "/api/logout", "/api/login", "/healthz"];

/// Anonymous visitors to a page are sent to the sign-in page; signed-in
/// non-admins get 403 on admin pages (the page itself says why); an account
/// with a temporary password can only change it (or sign out).
pub async fn guard_pages(req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let user = req.extensions().get::<RequestUser>().and_then(|u| u.0.clone());
    if user.as_ref().is_some_and(|u| u.must_change_password)
        && !OPEN_TO_TEMPORARY.contains(&path.as_str())
        && !is_asset(&path)
    {
        let html =
            req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html"));
        if !path.starts_with("/api/") || html {
            return Redirect::to(CHANGE_PASSWORD_PAGE).into_response();
        }
        let why = "choose a new password first (your password was reset by an administrator)";
        if path.starts_with("/api/v1/") {
            return crate::routes::api_v1::error(StatusCode::FORBIDDEN, why);
        }
        let body = serde_json::json!({ "Invalid": why });
        return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
    }
    if req.method() != Method::GET
        || path == "/login"
        || path.starts_with("/api/")
        || is_asset(&path)
        || path == "/healthz"
        || path.starts_with("/auth/")
    {
        return next.run(req).await;
    }
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

/// Who counts as this site for the same-origin check: the scheme the
/// server is reached by as well as its host and port.
#[derive(Clone, Debug, Default)]
pub struct OriginRule {
    /// `--public-origin`, normalised ([`normalize_origin`]).
    pub public_origin: Option<String>,
    /// `--secure-cookies`: browsers reach this server over HTTPS (a TLS
    /// terminator in front of it).
    pub secure: bool,
    /// `--trusted-proxy`: the proxy's `X-Forwarded-Proto`, when it sends
    /// one, says which scheme the browser used.
    pub trusted_proxy: bool,
}

impl OriginRule {
    /// The scheme browsers use to reach this server: `https` with
    /// `--secure-cookies` or when the trusted proxy says so, else `http`.
    pub fn scheme(&self, headers: &axum::http::HeaderMap) -> &'static str {
        let proxied = || {
            let last = headers.get_all("x-forwarded-proto").iter().next_back();
            last.and_then(|v| v.to_str().ok()).and_then(|v| v.rsplit(',').next()).map(str::trim)
        };
        if self.secure || (self.trusted_proxy && proxied().is_some_and(|p| p.eq_ignore_ascii_case("https"))) {
            "https"
        } else {
            "http"
        }
    }

    /// The Origin rule itself; the terminal's WebSocket upgrade (a GET)
    /// checks it too. An `Origin` is this site when it is `--public-origin`
    /// (compared as an origin, see [`normalize_origin`]), or when its
    /// scheme is the one this server is reached by ([`Self::scheme`]) and
    /// its host and port are the request's `Host`: `https://host:port`
    /// sent to a plain-HTTP server is another origin, as is the reverse.
    pub fn allows(&self, headers: &axum::http::HeaderMap) -> bool {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        match headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
            Some(origin) => {
                let this_host = || {
                    let Some((scheme, authority)) = origin.split_once("://") else { return false };
                    host.is_some_and(|h| authority == h) && scheme.eq_ignore_ascii_case(self.scheme(headers))
                };
                let public = || {
                    let public = self.public_origin.as_deref().and_then(|p| normalize_origin(p).ok());
                    public.is_some() && public == normalize_origin(origin).ok()
                };
                this_host() || public()
            }
            // No Origin: not a browser, or a same-origin navigation in an old
            // browser. Fetch metadata, where present, still tells cross-site.
            None => headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) != Some("cross-site"),
        }
    }
}

/// Refuses state-changing requests that a browser sent from another site.
/// Browsers always send `Origin` on cross-site POSTs; it must name this
/// site ([`OriginRule::allows`]). Under `/api/v1/` the refusal is the
/// API's JSON.
pub async fn same_origin(State(rule): State<OriginRule>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    if rule.allows(req.headers()) {
        next.run(req).await
    } else if req.uri().path().starts_with("/api/v1/") {
        crate::routes::api_v1::error(StatusCode::FORBIDDEN, "cross-origin request refused")
    } else {
        (StatusCode::FORBIDDEN, "cross-origin request refused").into_response()
    }
}

/// An origin as browsers send it in `Origin`: `scheme://host[:port]`, the
/// scheme (http or https) and host in lower case, without the scheme's
/// default port, path, query or trailing slash. `--public-origin` goes
/// through it when the command line is read, so
/// `https://Gantry.Example.org/` matches what a browser sends and a value
/// that is no origin at all (no scheme, a path) stops the start saying so.
pub fn normalize_origin(value: &str) -> Result<String, String> {
    let bad = |why: &str| {
        format!("{value:?} is not an origin ({why}); write it as scheme://host[:port], e.g. https://gantry.example.org")
    };
    let uri: axum::http::Uri = value.trim().parse().map_err(|_| bad("not a URL"))?;
    let scheme = uri.scheme_str().ok_or_else(|| bad("no scheme"))?.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(bad("the scheme must be http or https"));
    }
    let authority = uri.authority().ok_or_else(|| bad("no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("no user name or password"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad("no path or query"));
    }
    let host = authority.host().to_ascii_lowercase();
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = match (scheme.as_str(), authority.port_u16()) {
        ("https", Some(443)) | ("http", Some(80)) | (_, None) => String::new(),
        (_, Some(port)) => format!(":{port}"),
    };
    Ok(format!("{scheme}://{host}{port}"))
}

/// Public assets: the build's files (`/pkg/`), the vendored terminal
/// scripts (`/vendor/`), and files at the site root (`/favicon.svg`).
/// Nothing deeper: a dot deeper down is part of a name — a dataset version
/// `baseline.1` (its page is `/datasets/coco/baseline.1`), a dataset file's
/// resumable upload (`…/uploads/train.bin`) — and the session counts there.
pub fn is_asset(path: &str) -> bool {
    let at_root = path.strip_prefix('/').is_some_and(|rest| !rest.contains('/') && rest.contains('.'));
    path.starts_with("/pkg/") || path.starts_with("/vendor/") || at_root
}

/// Percent-encodes a query value, keeping `/` readable.
pub(crate) fn encode_query_value(s: &str) -> String {
    gantry_core::url::encode_path(s)
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
        assert!(!is_asset("/api/v1/datasets/coco/versions/v1/uploads/train.bin"), "API names may have dots");
        assert!(!is_asset("/datasets/coco/baseline.1"), "a version's page, whose name has a dot");
        assert!(is_asset("/vendor/xterm.js"));
    }

    fn origin_allowed(headers: &axum::http::HeaderMap, public_origin: Option<&str>) -> bool {
        OriginRule { public_origin: public_origin.map(str::to_string), ..OriginRule::default() }.allows(headers)
    }

    fn with(origin: &str) -> axum::http::HeaderMap {
        let mut h = axum::http::HeaderMap::new();
        h.insert(header::HOST, "127.0.0.1:3000".parse().unwrap());
        h.insert(header::ORIGIN, origin.parse().unwrap());
        h
    }

    #[test]
    fn this_host_counts_with_its_scheme_only() {
        let plain = OriginRule::default();
        assert!(plain.allows(&with("http://127.0.0.1:3000")));
        assert!(!plain.allows(&with("https://127.0.0.1:3000")), "https origin against a plain-HTTP server");
        let secure = OriginRule { secure: true, ..OriginRule::default() };
        assert!(secure.allows(&with("https://127.0.0.1:3000")));
        assert!(!secure.allows(&with("http://127.0.0.1:3000")), "http origin against --secure-cookies");
        let proxied = OriginRule { trusted_proxy: true, ..OriginRule::default() };
        let mut h = with("https://127.0.0.1:3000");
        assert!(!proxied.allows(&h), "no X-Forwarded-Proto: plain HTTP");
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        assert!(proxied.allows(&h));
        let mut h = with("http://127.0.0.1:3000");
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        assert!(!proxied.allows(&h), "the proxy says https");
        assert!(plain.allows(&h), "an untrusted X-Forwarded-Proto is ignored");
        let mut h = with("https://127.0.0.1:3000");
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        assert!(!plain.allows(&h), "X-Forwarded-Proto counts only from a trusted proxy");
    }

    #[test]
    fn public_origins_compare_as_origins() {
        assert!(origin_allowed(&with("https://gantry.example.org"), Some("https://Gantry.Example.org/")));
        assert!(origin_allowed(&with("https://gantry.example.org"), Some("https://gantry.example.org:443")));
        assert!(!origin_allowed(&with("https://gantry.example.org:8443"), Some("https://gantry.example.org")));
        assert!(!origin_allowed(&with("http://gantry.example.org"), Some("https://gantry.example.org")));
        assert!(!origin_allowed(&with("null"), Some("https://gantry.example.org")));
        assert!(!origin_allowed(&with("https://gantry.example.org"), Some("not an origin")));
        assert!(origin_allowed(&with("http://127.0.0.1:3000"), None), "this host");
    }

    #[test]
    fn next_is_query_encoded() {
        assert_eq!(encode_query_value("/admin?x=1&y=2"), "/admin%3Fx%3D1%26y%3D2");
    }
}
