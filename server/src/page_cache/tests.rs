//! The page cache on a small router whose one page counts its renders and
//! writes the request's nonce where a page's scripts carry it.

use super::kept::MAX_PAGE_BYTES;
use super::*;
use axum::{
    http::HeaderMap,
    middleware::{from_fn, from_fn_with_state},
    routing::get,
    Router,
};
use gantry_platform::accounts::User;
use std::sync::{
    atomic::{AtomicI64, AtomicUsize, Ordering},
    Arc,
};
use tower::ServiceExt;

/// Each test owns its data version and render count (tests run in
/// parallel; a real database's version would move with any test's writes).
macro_rules! counters {
    () => {{
        static COMMITS: AtomicI64 = AtomicI64::new(0);
        static RENDERS: AtomicUsize = AtomicUsize::new(0);
        let version: VersionSource = Arc::new(|| Box::pin(async { Some(COMMITS.load(Ordering::SeqCst)) }));
        (&COMMITS, &RENDERS, version)
    }};
}

/// `/slow` renders once `release` says so, after telling `started`.
struct Slow {
    started: tokio::sync::Notify,
    release: tokio::sync::watch::Sender<bool>,
}

static SLOW: std::sync::LazyLock<Slow> = std::sync::LazyLock::new(|| Slow {
    started: tokio::sync::Notify::new(),
    release: tokio::sync::watch::Sender::new(false),
});

fn router(cache: PageCache, renders: &'static AtomicUsize) -> Router {
    router_with(cache, renders, None)
}

/// [`router`]; with `commits`, a request that says `x-commit-after-user`
/// has a commit land right after its account was resolved — as an
/// administrator's change of that account's group would.
fn router_with(cache: PageCache, renders: &'static AtomicUsize, commits: Option<&'static AtomicI64>) -> Router {
    let page = move |req: Request| async move {
        let n = renders.fetch_add(1, Ordering::SeqCst) + 1;
        if req.uri().path() == "/slow" {
            SLOW.started.notify_one();
            let mut release = SLOW.release.subscribe();
            let _ = release.wait_for(|go| *go).await;
        }
        let nonce = req.extensions().get::<CspNonce>().unwrap().0.clone();
        let status = match req.uri().path() {
            "/missing" => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        };
        let mut res =
            Response::new(Body::from(format!("<script nonce=\"{nonce}\">render {n}</script><p>{}</p>", req.uri())));
        *res.status_mut() = status;
        let kind = if req.uri().path() == "/text" { "text/plain" } else { "text/html; charset=utf-8" };
        res.headers_mut().insert(header::CONTENT_TYPE, kind.parse().unwrap());
        if req.uri().path() == "/failed" {
            res.headers_mut().insert(NOT_KEPT, "1".parse().unwrap());
        }
        if req.uri().path() == "/cookie" {
            res.headers_mut().insert(header::SET_COOKIE, "flash=1".parse().unwrap());
        }
        if req.uri().path() == "/big" {
            *res.body_mut() = Body::from(vec![b'x'; MAX_PAGE_BYTES + 1]);
        }
        res
    };
    // What the outer layers put in: a fresh nonce, the signed-in user.
    let outer = move |req: Request, next: Next| async move {
        let mut req = req;
        let n = req.headers().get("x-nonce").unwrap().to_str().unwrap().to_string();
        let user = req.headers().get("x-user").map(|u| u.to_str().unwrap().parse::<i64>().unwrap());
        req.extensions_mut().insert(CspNonce(n));
        req.extensions_mut().insert(RequestUser(user.map(test_user)));
        if let (Some(commits), true) = (commits, req.headers().contains_key("x-commit-after-user")) {
            commits.fetch_add(1, Ordering::SeqCst);
        }
        next.run(req).await
    };
    // As the server's router: the version is read before the account.
    Router::new()
        .route("/{*page}", get(page).post(page))
        .route_layer(from_fn_with_state(cache.clone(), keep_pages))
        .layer(from_fn(outer))
        .layer(from_fn_with_state(Some(cache), read_version_first))
}

fn test_user(id: i64) -> User {
    User {
        id,
        username: format!("u{id}"),
        role: gantry_core::Role::User,
        group_id: 1,
        group_name: "default".into(),
        group_quota: gantry_platform::accounts::GroupQuota { gpu_quota: 0, gpus_in_use: 0, max_gpus_per_machine: 0 },
        disabled: false,
        must_change_password: false,
        session_gen: 0,
        reclaim_notices: false,
    }
}

async fn fetch(
    app: &Router,
    method: &str,
    uri: &str,
    user: Option<i64>,
    nonce: &str,
) -> (StatusCode, HeaderMap, String) {
    fetch_with(app, axum::http::Request::builder().method(method).uri(uri), user, nonce).await
}

async fn fetch_with(
    app: &Router,
    req: axum::http::request::Builder,
    user: Option<i64>,
    nonce: &str,
) -> (StatusCode, HeaderMap, String) {
    let mut req = req.header("x-nonce", nonce);
    if let Some(u) = user {
        req = req.header("x-user", u.to_string());
    }
    let res = tokio::time::timeout(Duration::from_secs(10), app.clone().oneshot(req.body(Body::empty()).unwrap()))
        .await
        .expect("the page answered in time")
        .unwrap();
    let (parts, body) = res.into_parts();
    let bytes = tokio::time::timeout(Duration::from_secs(10), axum::body::to_bytes(body, usize::MAX))
        .await
        .expect("the body came in time")
        .unwrap();
    (parts.status, parts.headers, String::from_utf8(bytes.to_vec()).unwrap())
}

#[tokio::test]
async fn a_page_is_served_again_with_a_fresh_nonce_until_a_commit() {
    let (commits, renders, count) = counters!();
    let app = router(PageCache::new(Duration::from_secs(3600), count), renders);
    let (_, _, first) = fetch(&app, "GET", "/machines?page=2", Some(1), "nonceA").await;
    assert_eq!(first, "<script nonce=\"nonceA\">render 1</script><p>/machines?page=2</p>");
    let (status, headers, again) = fetch(&app, "GET", "/machines?page=2", Some(1), "nonceB").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    assert_eq!(
        again, "<script nonce=\"nonceB\">render 1</script><p>/machines?page=2</p>",
        "kept, with this request's nonce"
    );
    assert_eq!(renders.load(Ordering::SeqCst), 1);

    commits.fetch_add(1, Ordering::SeqCst);
    let (_, _, after) = fetch(&app, "GET", "/machines?page=2", Some(1), "nonceC").await;
    assert_eq!(
        after, "<script nonce=\"nonceC\">render 2</script><p>/machines?page=2</p>",
        "a commit means a new render"
    );
}

#[tokio::test]
async fn a_page_is_never_served_to_another_user_or_for_another_address() {
    let (_, renders, count) = counters!();
    let app = router(PageCache::new(Duration::from_secs(3600), count), renders);
    fetch(&app, "GET", "/machines", Some(1), "n1").await;
    let (_, _, other_user) = fetch(&app, "GET", "/machines", Some(2), "n2").await;
    assert!(other_user.contains("render 2"), "{other_user}");
    let (_, _, anonymous) = fetch(&app, "GET", "/machines", None, "n3").await;
    assert!(anonymous.contains("render 3"), "{anonymous}");
    let (_, _, other_query) = fetch(&app, "GET", "/machines?state=running", Some(1), "n4").await;
    assert!(other_query.contains("render 4"), "{other_query}");
    let (_, _, same) = fetch(&app, "GET", "/machines", Some(1), "n5").await;
    assert!(same.contains("render 1"), "{same}");
}

#[tokio::test]
async fn a_page_older_than_its_age_is_rendered_again() {
    let (_, renders, count) = counters!();
    let app = router(PageCache::new(Duration::ZERO, count), renders);
    fetch(&app, "GET", "/home", Some(1), "n1").await;
    let (_, _, again) = fetch(&app, "GET", "/home", Some(1), "n2").await;
    assert!(again.contains("render 2"), "{again}");
}

#[tokio::test]
async fn failed_refused_plain_big_cookie_setting_and_posted_answers_are_not_kept() {
    let (_, renders, count) = counters!();
    let app = router(PageCache::new(Duration::from_secs(3600), count), renders);
    for (method, uri) in [
        ("GET", "/failed"),
        ("GET", "/missing"),
        ("GET", "/text"),
        ("GET", "/big"),
        ("GET", "/cookie"),
        ("POST", "/form"),
    ] {
        let before = renders.load(Ordering::SeqCst);
        let (status, _, _) = fetch(&app, method, uri, Some(1), "n1").await;
        let (status2, _, _) = fetch(&app, method, uri, Some(1), "n2").await;
        assert_eq!(status, status2);
        assert_eq!(renders.load(Ordering::SeqCst), before + 2, "{method} {uri} must be rendered each time");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_come_during_a_render_wait_for_it_instead_of_rendering() {
    let (_, renders, count) = counters!();
    let cache = PageCache::new(Duration::from_secs(3600), count);
    let app = router(cache.clone(), renders);
    let first = tokio::spawn({
        let app = app.clone();
        async move { fetch(&app, "GET", "/slow", Some(1), "first").await }
    });
    tokio::time::timeout(Duration::from_secs(10), SLOW.started.notified()).await.expect("the first render started");
    let others: Vec<_> = (0..3)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move { fetch(&app, "GET", "/slow", Some(1), &format!("other{i}")).await })
        })
        .collect();
    let key = Key { session: None, user: Some(1), uri: "/slow".into(), html: false };
    tokio::time::timeout(Duration::from_secs(10), async {
        while cache.waiting(&key) < 3 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the three later requests wait for the render under way");
    SLOW.release.send_replace(true);
    assert_eq!(first.await.unwrap().2, "<script nonce=\"first\">render 1</script><p>/slow</p>");
    for (i, other) in others.into_iter().enumerate() {
        assert_eq!(other.await.unwrap().2, format!("<script nonce=\"other{i}\">render 1</script><p>/slow</p>"));
    }
    assert_eq!(renders.load(Ordering::SeqCst), 1, "rendered once for four requests");
}

#[tokio::test]
async fn without_a_readable_data_version_every_request_is_rendered() {
    let (_, renders, _) = counters!();
    let unreadable: VersionSource = Arc::new(|| Box::pin(async { None }));
    let app = router(PageCache::new(Duration::from_secs(3600), unreadable), renders);
    fetch(&app, "GET", "/machines", Some(1), "n1").await;
    let (_, _, again) = fetch(&app, "GET", "/machines", Some(1), "n2").await;
    assert!(again.contains("render 2"), "{again}");
}

#[tokio::test]
async fn a_commit_between_resolving_the_account_and_rendering_is_never_hidden() {
    let (commits, renders, count) = counters!();
    let app = router_with(PageCache::new(Duration::from_secs(3600), count), renders, Some(commits));
    // The account is resolved (as it was), then its change commits, then
    // the page renders with the account as it was.
    let first = axum::http::Request::builder().uri("/machines").header("x-commit-after-user", "1");
    let (_, _, old) = fetch_with(&app, first, Some(1), "n1").await;
    assert!(old.contains("render 1"), "{old}");
    // Kept under the version read before the account: the commit is past
    // it, so the next request renders with the account as it is now.
    let (_, _, now) = fetch(&app, "GET", "/machines", Some(1), "n2").await;
    assert!(now.contains("render 2"), "the page of the account as it was was served again: {now}");
    let (_, _, again) = fetch(&app, "GET", "/machines", Some(1), "n3").await;
    assert!(again.contains("render 2"), "with no commit since, kept: {again}");
}

#[tokio::test]
async fn without_the_version_read_first_a_page_is_rendered_and_not_kept() {
    let (_, renders, count) = counters!();
    let cache = PageCache::new(Duration::from_secs(3600), count);
    let nonce = |req: Request, next: Next| async move {
        let mut req = req;
        req.extensions_mut().insert(CspNonce("n".into()));
        next.run(req).await
    };
    let page = move || async move {
        let n = renders.fetch_add(1, Ordering::SeqCst) + 1;
        ([(header::CONTENT_TYPE, "text/html")], format!("render {n}"))
    };
    let app =
        Router::new().route("/p", get(page)).route_layer(from_fn_with_state(cache, keep_pages)).layer(from_fn(nonce));
    for n in 1..=2 {
        let res = app.clone().oneshot(axum::http::Request::get("/p").body(Body::empty()).unwrap()).await.unwrap();
        let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
        assert_eq!(body, format!("render {n}"));
    }
}
