//! Starts the real Gantry router on 127.0.0.1:0 over a temporary SQLite
//! file, as `gantry serve` does, and gives tests an HTTP client for it.
#![allow(dead_code)]

pub mod child;

use gantry_core::Role;
use gantry_platform::{accounts, db};
use gantry_server::{bootstrap, router};
use std::{net::SocketAddr, path::PathBuf};
use tokio::task::JoinHandle;

pub const ADMIN_PASSWORD: &str = "admin-password-1";

pub struct TestServer {
    pub addr: SocketAddr,
    pub pool: db::Pool,
    pub db_path: PathBuf,
    task: JoinHandle<()>,
}

impl TestServer {
    pub async fn start(dir: &tempfile::TempDir) -> TestServer {
        Self::start_with(dir, false).await
    }

    pub async fn start_with(dir: &tempfile::TempDir, secure_cookies: bool) -> TestServer {
        let db_path = dir.path().join("gantry.db");
        let pool = db::connect_file(&db_path).await.unwrap();
        db::migrate(&pool).await.unwrap();
        bootstrap::ensure_admin(&pool, "admin", Some(ADMIN_PASSWORD)).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let opts = router::Options {
            site_root: dir.path().join("site"),
            site_addr: addr,
            secure_cookies,
            public_origin: None,
            page_cache_ms: router::PAGE_CACHE_MS,
        };
        let app = router::build(opts, pool.clone()).await.unwrap();
        let task = tokio::spawn(async move {
            router::serve(listener, app).await.unwrap();
        });
        TestServer { addr, pool, db_path, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A browser-like client: keeps cookies, does not follow redirects (tests
    /// look at them), and sends this server as its Origin.
    pub fn client(&self) -> reqwest::Client {
        client_for(self.addr)
    }

    pub async fn add_user(&self, name: &str, password: &str, role: Role) {
        accounts::create_user(&self.pool, None, accounts::NewUser { username: name, password, role, group: None })
            .await
            .unwrap();
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

pub fn client_for(addr: SocketAddr) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::ORIGIN, format!("http://{addr}").parse().unwrap());
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .unwrap()
}

/// Calls the login server function the way the hydrated page does.
pub async fn login(server: &TestServer, client: &reqwest::Client, user: &str, password: &str) -> reqwest::Response {
    client.post(server.url("/api/login")).form(&[("username", user), ("password", password)]).send().await.unwrap()
}

pub async fn count(pool: &db::Pool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}
