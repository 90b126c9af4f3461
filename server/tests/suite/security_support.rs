//! A Gantry router started with explicit security settings (trusted proxy,
//! a manual session clock, a small argon2 gate) for the security and
//! account tests, next to the plain `common::TestServer`; the installation
//! and the router on port 0 are `gantry_testkit`'s.

use gantry_platform::{db, fleet::Fleet, machines::Admissions, password::Gate, workspace::Limits};
use gantry_server::{bootstrap, router, security::Security};
use gantry_testkit::{install, serve::Served};
use std::{net::SocketAddr, sync::Arc, time::Duration};

pub const ADMIN_PASSWORD: &str = "admin-password-1";

pub struct Secured {
    pub addr: SocketAddr,
    pub pool: db::Pool,
    served: Served,
}

/// A gate with room for `size` verifications and a minute of queue: every
/// attempt is verified eventually, so counts do not depend on timing.
pub fn gate(size: usize) -> Arc<Gate> {
    Gate::new(size, Duration::from_secs(60))
}

pub async fn start(dir: &tempfile::TempDir, security: Security, secure_cookies: bool) -> Secured {
    let pool = install::database(dir.path()).await;
    bootstrap::ensure_admin(&pool, "admin", Some(ADMIN_PASSWORD)).await.unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let router_pool = pool.clone();
    let served = Served::start(site, secure_cookies, |opts| async move {
        let dispatch = Arc::new(tokio::sync::Notify::new());
        let admissions = Admissions::start(router_pool.clone(), dispatch.clone());
        router::build_secured(opts, security, Limits::default(), router_pool, admissions, dispatch, Fleet::new())
            .await
            .unwrap()
    })
    .await;
    Secured { addr: served.addr, pool, served }
}

impl Secured {
    pub fn url(&self, path: &str) -> String {
        self.served.url(path)
    }

    /// A browser-like client (cookies, no redirects, this site as Origin).
    pub fn client(&self) -> reqwest::Client {
        self.served.client()
    }

    /// The same, as seen through a proxy that says the client is `forwarded`.
    pub fn client_from(&self, forwarded: &str) -> reqwest::Client {
        gantry_testkit::serve::browser(self.addr, Some(forwarded))
    }

    /// Signs in through the server function, as the hydrated page does.
    pub async fn login(&self, client: &reqwest::Client, user: &str, password: &str) -> reqwest::Response {
        gantry_testkit::serve::sign_in(client, self.addr, user, password).await
    }

    pub async fn add_user(&self, name: &str, password: &str, role: gantry_core::Role) -> i64 {
        install::user(&self.pool, name, password, role, None).await.id
    }
}

impl Drop for Secured {
    fn drop(&mut self) {
        self.served.stop();
    }
}

/// Standard base64 with the URL-safe alphabet, as Leptos encodes `__err`.
pub fn base64_url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Every `<script` of `html` either carries the nonce of `csp` (the page's
/// Content-Security-Policy) or loads a file of this site: an inline script
/// without it is one the browser refuses to run. Returns how many there are.
pub fn assert_scripts_carry_the_nonce(csp: &str, html: &str) -> usize {
    let start = csp.find("'nonce-").expect("a nonce in the CSP") + 7;
    let nonce = csp[start..].split('\'').next().unwrap();
    let scripts: Vec<&str> = html.split("<script").skip(1).map(|s| s.split('>').next().unwrap()).collect();
    for attrs in &scripts {
        assert!(
            attrs.contains(&format!("nonce=\"{nonce}\"")) || attrs.contains("src=\"/"),
            "script without the nonce: <script{attrs}>"
        );
    }
    scripts.len()
}
