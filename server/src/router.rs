//! The HTTP surface: Leptos pages and server functions, static files,
//! `/healthz`, wrapped in sessions, guards, compression and tracing.

use crate::{
    assets,
    config::ServeArgs,
    http::{
        guard::{guard_pages, is_asset, resolve_user, same_origin, Guard, OriginRule},
        headers::{security_headers, CspNonce, HeaderPolicy},
        limits::lift_body_deadline,
        outcomes::{hand_outcomes_to_page, keep_function_outcomes},
        request_id::request_id,
    },
    page_cache::{keep_pages, read_version_first, PageCache, VersionSource},
    security::Security,
};
use app::{shell, state::AppState, App};
use axum::{
    body::Body,
    extract::{Request, State},
    http::StatusCode,
    middleware::{from_fn, from_fn_with_state},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use axum_messages::MessagesManagerLayer;
use gantry_platform::{db::Pool, PlatformError};
use leptos::{
    config::LeptosOptions,
    prelude::{provide_context, use_context},
};
use leptos_axum::{generate_route_list, handle_server_fns_with_context, AxumRouteListing, LeptosRoutes};
use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, LazyLock},
    time::Duration,
};
use tower_http::{compression::CompressionLayer, trace::TraceLayer};
use tower_sessions::{cookie::SameSite, Expiry, SessionManagerLayer};
use tower_sessions_core::ExpiredDeletion;
use tower_sessions_sqlx_store::SqliteStore;

#[derive(Debug, Clone)]
pub struct Options {
    pub site_root: PathBuf,
    pub site_addr: SocketAddr,
    pub secure_cookies: bool,
    pub public_origin: Option<String>,
    /// How long a rendered page may be served again with no commit in
    /// between (`page_cache`); 0 renders every request.
    pub page_cache_ms: u64,
}

/// `--page-cache-ms`' default.
pub const PAGE_CACHE_MS: u64 = 1000;

impl Options {
    pub fn from_args(args: &ServeArgs) -> Self {
        Options {
            site_root: args.site_root.clone(),
            site_addr: args.listen,
            secure_cookies: args.secure_cookies,
            public_origin: args.public_origin.clone(),
            page_cache_ms: args.page_cache_ms,
        }
    }
}

fn leptos_options(opts: &Options) -> LeptosOptions {
    // cargo-leptos writes the asset hashes next to the binary when the
    // build hashes file names; use them whenever they are there.
    let hashed = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("hash.txt").exists()))
        .unwrap_or(false);
    LeptosOptions::builder()
        .output_name("gantry")
        .site_root(opts.site_root.to_string_lossy().to_string())
        .site_pkg_dir("pkg")
        .site_addr(opts.site_addr)
        .hash_files(hashed)
        .build()
}

pub async fn build(opts: Options, pool: Pool) -> Result<Router, PlatformError> {
    let dispatch = Arc::new(tokio::sync::Notify::new());
    let admissions = gantry_platform::machines::Admissions::start(pool.clone(), dispatch.clone());
    build_with(opts, pool, admissions, dispatch, gantry_platform::fleet::Fleet::new()).await
}

/// The router over already-running background services.
pub async fn build_with(
    opts: Options,
    pool: Pool,
    admissions: gantry_platform::machines::Admissions,
    dispatch: Arc<tokio::sync::Notify>,
    fleet: gantry_platform::fleet::Fleet,
) -> Result<Router, PlatformError> {
    build_full(opts, gantry_platform::workspace::Limits::default(), pool, admissions, dispatch, fleet).await
}

/// [`build_with`], with the limits of the terminal, logs and files routes.
pub async fn build_full(
    opts: Options,
    workspace: gantry_platform::workspace::Limits,
    pool: Pool,
    admissions: gantry_platform::machines::Admissions,
    dispatch: Arc<tokio::sync::Notify>,
    fleet: gantry_platform::fleet::Fleet,
) -> Result<Router, PlatformError> {
    build_secured(opts, Security::default(), workspace, pool, admissions, dispatch, fleet).await
}

/// [`build_full`] with explicit security settings (trusted proxy, session
/// idle limit and clock, the argon2 gate).
pub async fn build_secured(
    opts: Options,
    security: Security,
    workspace: gantry_platform::workspace::Limits,
    pool: Pool,
    admissions: gantry_platform::machines::Admissions,
    dispatch: Arc<tokio::sync::Notify>,
    fleet: gantry_platform::fleet::Fleet,
) -> Result<Router, PlatformError> {
    let store = SqliteStore::new(pool.clone());
    let expired = store.clone();
    tokio::spawn(delete_expired_sessions(Duration::from_secs(3600), move || {
        let store = expired.clone();
        async move { store.delete_expired().await }
    }));
    tokio::spawn(gantry_platform::throttle::prune_loop(pool.clone(), Duration::from_secs(3600)));
    // The guard ends idle sessions by its own clock; the store's expiry is
    // the backstop that removes them, a renewal period later.
    let store_idle = security.session_idle_secs + security.renew_after_secs();
    let sessions = SessionManagerLayer::new(store)
        .with_name(session_cookie_name(opts.secure_cookies))
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(opts.secure_cookies)
        .with_expiry(Expiry::OnInactivity(time::Duration::seconds(store_idle)));

    let state = AppState { leptos_options: leptos_options(&opts), pool, admissions, dispatch, fleet };
    let routes = route_list();
    let context = {
        let state = state.clone();
        move || provide_page_context(&state)
    };
    let page_shell = {
        let options = state.leptos_options.clone();
        move || shell(options.clone())
    };

    // /metrics has its own access rule, so it sits outside the sessions and
    // the page guard — but inside the layers every response gets (headers,
    // request id, tracing).
    // Behind a proxy (or a TLS terminator) a loopback peer may be that
    // proxy: /metrics then needs its token.
    // One per process: ends what a browser session let in (terminals,
    // followed logs, machine files, dataset transfers) once it ends.
    let session_watch = crate::routes::workspace::SessionWatch::start(state.pool.clone(), &security);
    let origin = OriginRule {
        public_origin: opts.public_origin.clone(),
        secure: opts.secure_cookies,
        trusted_proxy: security.trusted_proxy,
    };
    let metrics = crate::routes::metrics::routes(state.pool.clone(), security.trusted_proxy || opts.secure_cookies);
    // Forms' outcomes travel to their pages in the session
    // (`http::outcomes`): the server functions Leptos registers here keep
    // them, a page takes those its session's last form left for it.
    let pages = Router::new()
        .leptos_routes_with_context(&state, routes, context, page_shell)
        .route_layer(from_fn(hand_outcomes_to_page))
        .route_layer(from_fn(keep_function_outcomes))
        .route_layer(MessagesManagerLayer);
    // Pages only: a rendered page is served again while nothing it shows
    // can have changed (inside the sign-in checks below).
    let page_cache = match opts.page_cache_ms {
        0 => None,
        ms => {
            let version = Arc::new(gantry_platform::db_version::DataVersion::open(&state.pool).await?);
            let version: VersionSource = Arc::new(move || {
                let version = version.clone();
                Box::pin(async move { version.read().await.ok() })
            });
            Some(PageCache::new(Duration::from_millis(ms), version))
        }
    };
    let pages = match &page_cache {
        None => pages,
        Some(cache) => pages.route_layer(from_fn_with_state(cache.clone(), keep_pages)),
    };
    let app = pages
        .merge(crate::routes::api_v1::routes())
        // The streamed uploads (datasets; a machine's files, below) take
        // gigabytes and cut a body that stalls themselves (60 s without a
        // byte): the accept loop's total body deadline is lifted there.
        .merge(
            crate::routes::datasets::routes()
                .route_layer(from_fn(lift_body_deadline))
                .route_layer(MessagesManagerLayer),
        )
        .route("/api/{*fn_name}", get(server_fns).post(server_fns))
        .route("/healthz", get(healthz))
        .merge(crate::routes::oidc::routes(security.oidc.clone()))
        .merge(
            crate::routes::workspace::routes(state.clone(), workspace, origin.clone(), session_watch.clone())
                .route_layer(from_fn(lift_body_deadline))
                .route_layer(MessagesManagerLayer),
        )
        .fallback(fallback)
        .layer(axum::Extension(workspace))
        // The dataset routes' transfers end with their session too.
        .layer(axum::Extension(session_watch))
        // The sign-in page offers the OpenID Connect provider when there is one.
        .layer(axum::Extension(security.oidc.as_ref().map(|o| o.offer())))
        .layer(from_fn(guard_pages))
        .layer(from_fn_with_state(Guard { state: state.clone(), security: security.clone() }, resolve_user))
        // The page cache's version, read before the account is (`page_cache`).
        .layer(from_fn_with_state(page_cache, read_version_first))
        .layer(sessions)
        .layer(from_fn_with_state(origin, same_origin))
        .with_state(state);
    Ok(app
        .merge(metrics)
        .layer(CompressionLayer::new())
        .layer(from_fn_with_state(HeaderPolicy { hsts: opts.secure_cookies }, security_headers))
        .layer(from_fn(request_id))
        .layer(TraceLayer::new_for_http()))
}

/// The session cookie's name. Served over HTTPS (`--secure-cookies`) it
/// carries the `__Host-` prefix: browsers then accept it only as set by
/// this host itself, `Secure`, for `/` and without a `Domain` — a sibling
/// subdomain or a plain-HTTP answer cannot plant or shadow it.
pub fn session_cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-gantry_session"
    } else {
        "gantry_session"
    }
}

/// Deletes expired sessions every `every` (the first pass at once) for as
/// long as the process runs. A pass that fails (a locked or full database)
/// is logged and the next one comes at its time; one that panics is
/// contained (`contained::pass`). tower-sessions' own
/// `continuously_delete_expired` ended for good at its first error, and
/// expired sessions — rows whose key is a cookie's value — then piled up
/// until a restart.
pub async fn delete_expired_sessions<F, Fut, E>(every: Duration, mut delete: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Some(Err(e)) = gantry_platform::contained::pass("expired sessions", delete()).await {
            tracing::warn!(error = %e, "deleting expired sessions failed; trying again in {every:?}");
        }
    }
}

/// The app's routes, generated once per process. Generating runs the app
/// with a process-wide flag that parks every resource first polled in the
/// meantime for ever (leptos-rs/leptos#4773): a second router built while
/// the first serves — every HTTP test binary does that — could leave a page
/// of the first waiting on its data with no answer. Once, before any
/// router exists, nothing renders inside that window.
fn route_list() -> Vec<AxumRouteListing> {
    static ROUTES: LazyLock<Vec<AxumRouteListing>> = LazyLock::new(|| generate_route_list(App));
    ROUTES.clone()
}

/// The app's state, and this request's CSP nonce for Leptos' inline
/// scripts (the security header layer made it and names it in the CSP).
fn provide_page_context(state: &AppState) {
    provide_context(state.clone());
    let nonce = use_context::<http::request::Parts>().and_then(|p| p.extensions.get::<CspNonce>().cloned());
    if let Some(CspNonce(n)) = nonce {
        provide_context(leptos::nonce::Nonce::from_value(n));
    }
}

async fn server_fns(State(state): State<AppState>, req: Request) -> impl IntoResponse {
    handle_server_fns_with_context(move || provide_context(state.clone()), req).await
}

/// Anonymous callers learn whether the database answers, not why not.
async fn healthz(State(state): State<AppState>) -> Response {
    match gantry_platform::db::ping(&state.pool).await {
        Ok(_) => (StatusCode::OK, "ok").into_response(),
        Err(e) => {
            tracing::error!(error = %e, "health check: database unavailable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable; see the server log").into_response()
        }
    }
}

/// Files from the site root; every other path renders the app, whose
/// fallback route answers 404.
async fn fallback(State(state): State<AppState>, req: Request<Body>) -> Response {
    if is_asset(req.uri().path()) {
        let root = PathBuf::from(state.leptos_options.site_root.as_ref());
        return match assets::try_serve(&root, req).await {
            Some(res) => res,
            None => (StatusCode::NOT_FOUND, "not found").into_response(),
        };
    }
    let options = state.leptos_options.clone();
    let render = leptos_axum::render_app_to_stream_with_context(
        move || provide_page_context(&state),
        move || shell(options.clone()),
    );
    render(req).await.into_response()
}

/// Serves until Ctrl-C or SIGTERM. Accepted sockets get TCP_NODELAY: small
/// responses otherwise wait on Nagle + delayed ACK (measured: p50 44 ms
/// without, 4 ms with, for a 1 KB file).
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    serve_until(listener, app, shutdown_signal()).await
}

/// Serves until `stop` resolves, then until every open connection has
/// ended (the caller decides how long to wait for that), with the default
/// connection limits.
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    app: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    crate::http::serve::serve_connections(listener, app, stop, Default::default()).await
}

/// Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}
