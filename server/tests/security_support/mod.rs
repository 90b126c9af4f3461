//! A Gantry router started with explicit security settings (trusted proxy,
//! a manual session clock, a small argon2 gate) for the security and
//! account tests, next to the plain `common::TestServer`.
#![allow(dead_code)]

use gantry_platform::{db, fleet::Fleet, machines::Admissions, password::Gate, workspace::Limits};
use gantry_server::{bootstrap, router, security::Security};
use std::{net::SocketAddr, sync::Arc, time::Duration};

pub const ADMIN_PASSWORD: &str = "admin-password-1";

pub struct Secured {
    pub addr: SocketAddr,
    pub pool: db::Pool,
    pub security: Security,
    task: tokio::task::JoinHandle<()>,
}

/// A gate with room for `size` verifications and a minute of queue: every
/// attempt is verified eventually, so counts do not depend on timing.
pub fn gate(size: usize) -> Arc<Gate> {
    Gate::new(size, Duration::from_secs(60))
}

pub async fn start(dir: &tempfile::TempDir, security: Security, secure_cookies: bool) -> Secured {
    let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
    db::migrate(&pool).await.unwrap();
    bootstrap::ensure_admin(&pool, "admin", Some(ADMIN_PASSWORD)).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    let opts = router::Options {
        site_root: site,
        site_addr: addr,
        secure_cookies,
        public_origin: None,
        page_cache_ms: router::PAGE_CACHE_MS,
    };
    let dispatch = Arc::new(tokio::sync::Notify::new());
    let admissions = Admissions::start(pool.clone(), dispatch.clone());
    let app = router::build_secured(
        opts,
        security.clone(),
        Limits::default(),
        pool.clone(),
        admissions,
        dispatch,
        Fleet::new(),
    )
    .await
    .unwrap();
    let task = tokio::spawn(async move {
        router::serve(listener, app).await.unwrap();
    });
    Secured { addr, pool, security, task }
}

impl Secured {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A browser-like client (cookies, no redirects, this site as Origin).
    pub fn client(&self) -> reqwest::Client {
        client_with(self.addr, None)
    }

    /// The same, as seen through a proxy that says the client is `forwarded`.
    pub fn client_from(&self, forwarded: &str) -> reqwest::Client {
        client_with(self.addr, Some(forwarded))
    }

    /// Signs in through the server function, as the hydrated page does.
    pub async fn login(&self, client: &reqwest::Client, user: &str, password: &str) -> reqwest::Response {
        client.post(self.url("/api/login")).form(&[("username", user), ("password", password)]).send().await.unwrap()
    }

    pub async fn add_user(&self, name: &str, password: &str, role: gantry_core::Role) -> i64 {
        use gantry_platform::accounts::{create_user, NewUser};
        create_user(&self.pool, None, NewUser { username: name, password, role, group: None }).await.unwrap().id
    }
}

impl Drop for Secured {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn client_with(addr: SocketAddr, forwarded: Option<&str>) -> reqwest::Client {
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
