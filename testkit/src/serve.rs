//! The real Gantry router on 127.0.0.1:0, as `gantry serve` builds it, and
//! browser-like clients for it: the server half of an installation (the
//! database is [`crate::install`]'s).

use gantry_server::router;
use std::{future::Future, net::SocketAddr, path::PathBuf};
use tokio::task::JoinHandle;

/// A router serving on 127.0.0.1 (a port of its own) in a task of the
/// test's runtime; it stops with the runtime, or at [`Served::stop`].
pub struct Served {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Served {
    /// Binds 127.0.0.1:0 and serves what `build` makes of the options
    /// (`site_root`, `secure_cookies`, the bound address as the site's, no
    /// public origin, the default page keeping).
    pub async fn start<F, Fut>(site_root: PathBuf, secure_cookies: bool, build: F) -> Served
    where
        F: FnOnce(router::Options) -> Fut,
        Fut: Future<Output = axum::Router>,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = router::Options {
            site_root,
            site_addr: addr,
            secure_cookies,
            public_origin: None,
            page_cache_ms: router::PAGE_CACHE_MS,
        };
        let app = build(opts).await;
        let task = tokio::spawn(async move {
            router::serve(listener, app).await.unwrap();
        });
        Served { addr, task }
    }

    /// [`Served::start`] with the router `gantry serve` builds over `pool`
    /// (`router::build`).
    pub async fn plain(site_root: PathBuf, secure_cookies: bool, pool: gantry_platform::db::Pool) -> Served {
        Served::start(site_root, secure_cookies, |opts| async move { router::build(opts, pool).await.unwrap() }).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A browser-like client (see [`browser`]).
    pub fn client(&self) -> reqwest::Client {
        browser(self.addr, None)
    }

    /// A browser-like client signed in as `user` (asserted).
    pub async fn signed_in(&self, user: &str, password: &str) -> reqwest::Client {
        signed_in(self.addr, user, password).await
    }

    /// Stops serving (connections open stay until they end).
    pub fn stop(&self) {
        self.task.abort();
    }
}

/// A browser-like client of the server at `addr`: keeps cookies, does not
/// follow redirects (tests look at them), and sends the server as its
/// Origin; `forwarded`: as seen through a proxy that says the client is
/// that address (`X-Forwarded-For`).
pub fn browser(addr: SocketAddr, forwarded: Option<&str>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::ORIGIN, format!("http://{addr}").parse().unwrap());
    if let Some(f) = forwarded {
        headers.insert("x-forwarded-for", f.parse().unwrap());
    }
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .unwrap()
}

/// Calls the login server function the way the sign-in page does.
pub async fn sign_in(client: &reqwest::Client, addr: SocketAddr, user: &str, password: &str) -> reqwest::Response {
    client
        .post(format!("http://{addr}/api/login"))
        .form(&[("username", user), ("password", password)])
        .send()
        .await
        .unwrap()
}

/// A [`browser`] signed in as `user` (asserted).
pub async fn signed_in(addr: SocketAddr, user: &str, password: &str) -> reqwest::Client {
    let client = browser(addr, None);
    let res = sign_in(&client, addr, user, password).await;
    assert!(res.status().is_success() || res.status().is_redirection(), "login: {}", res.status());
    client
}
