//! Starts the real Gantry router on 127.0.0.1:0 over a temporary SQLite
//! file, as `gantry serve` does, with the first administrator
//! (`gantry_testkit::{install, serve}`), and gives tests an HTTP client for it.

pub mod child;

use gantry_core::Role;
use gantry_platform::db;
use gantry_server::bootstrap;
use gantry_testkit::{install, serve::Served};
use std::net::SocketAddr;

pub use gantry_testkit::install::count;

pub const ADMIN_PASSWORD: &str = "admin-password-1";

pub struct TestServer {
    pub addr: SocketAddr,
    pub pool: db::Pool,
    served: Served,
}

impl TestServer {
    pub async fn start(dir: &tempfile::TempDir) -> TestServer {
        Self::start_with(dir, false).await
    }

    pub async fn start_with(dir: &tempfile::TempDir, secure_cookies: bool) -> TestServer {
        let pool = install::database(dir.path()).await;
        bootstrap::ensure_admin(&pool, "admin", Some(ADMIN_PASSWORD)).await.unwrap();
        let served = Served::plain(dir.path().join("site"), secure_cookies, pool.clone()).await;
        TestServer { addr: served.addr, pool, served }
    }

    pub fn url(&self, path: &str) -> String {
        self.served.url(path)
    }

    /// A browser-like client: keeps cookies, does not follow redirects (tests
    /// look at them), and sends this server as its Origin.
    pub fn client(&self) -> reqwest::Client {
        self.served.client()
    }

    pub async fn add_user(&self, name: &str, password: &str, role: Role) {
        install::user(&self.pool, name, password, role, None).await;
    }

    pub fn stop(self) {
        self.served.stop();
    }
}

/// Calls the login server function the way the hydrated page does.
pub async fn login(server: &TestServer, client: &reqwest::Client, user: &str, password: &str) -> reqwest::Response {
    gantry_testkit::serve::sign_in(client, server.addr, user, password).await
}
