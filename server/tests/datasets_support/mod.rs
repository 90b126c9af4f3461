//! The real router with dataset stores in a temporary directory (as
//! `gantry serve` adds them), users in two groups with API tokens, a
//! dataset `coco` (images, region local, group ml) with version `v1`, and
//! a raw HTTP/1.1 client for bodies that are huge or cut on purpose.
#![allow(dead_code)]

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser, User},
    datasets::{
        self,
        store::{ByteStream, DirStore, Store, TempWriter},
        Datasets, Limits, NewDataset,
    },
    db, tokens,
};
use gantry_server::router;
use std::{collections::HashMap, net::SocketAddr, path::PathBuf, sync::Arc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const PASSWORD: &str = "a-good-password";

pub struct Server {
    pub dir: tempfile::TempDir,
    pub addr: SocketAddr,
    pub pool: db::Pool,
    pub alice: User,
    pub carol: User,
    pub alice_token: String,
    pub carol_token: String,
    pub central: PathBuf,
    pub region: PathBuf,
}

pub async fn start(limits: Limits) -> Server {
    start_with(limits, None).await
}

/// `region`: the store of region `local` instead of the directory at
/// [`Server::region`].
pub async fn start_with(limits: Limits, region: Option<Arc<dyn Store>>) -> Server {
    start_with_stores(limits, None, region).await
}

/// [`start_with`], and `central`: the central store instead of the
/// directory at [`Server::central`].
pub async fn start_with_stores(
    limits: Limits,
    central_store: Option<Arc<dyn Store>>,
    region: Option<Arc<dyn Store>>,
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
    db::migrate(&pool).await.unwrap();
    accounts::create_group(&pool, None, "ml", 4).await.unwrap();
    accounts::create_group(&pool, None, "other", 4).await.unwrap();
    let alice = accounts::create_user(
        &pool,
        None,
        NewUser { username: "alice", password: PASSWORD, role: Role::User, group: Some("ml") },
    )
    .await
    .unwrap();
    let carol = accounts::create_user(
        &pool,
        None,
        NewUser { username: "carol", password: PASSWORD, role: Role::User, group: Some("other") },
    )
    .await
    .unwrap();
    let (_, alice_token) = tokens::create(&pool, &alice, "laptop").await.unwrap();
    let (_, carol_token) = tokens::create(&pool, &carol, "ci").await.unwrap();
    let central = dir.path().join("central");
    let regions = dir.path().join("regions");
    let central_store = central_store.unwrap_or_else(|| Arc::new(DirStore::new(&central)));
    let stores = Datasets::new(
        central_store,
        region.map(|r| ("local".to_string(), r)).into_iter().collect(),
        Some(regions.clone()),
        limits,
    );
    let new = NewDataset {
        code: "coco",
        name: "COCO",
        region: "local",
        category: "images",
        description: "",
        visibility: "group",
    };
    datasets::create_dataset(&pool, &alice, &new).await.unwrap();
    datasets::create_version(&pool, &alice, "coco", "v1").await.unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let opts = router::Options {
        site_root: dir.path().join("site"),
        site_addr: addr,
        secure_cookies: false,
        public_origin: None,
        page_cache_ms: router::PAGE_CACHE_MS,
    };
    let app = router::build(opts, pool.clone()).await.unwrap().layer(axum::Extension(stores));
    tokio::spawn(async move {
        let _ = router::serve(listener, app).await;
    });
    Server { dir, addr, pool, alice, carol, alice_token, carol_token, central, region: regions.join("local") }
}

pub fn limits() -> Limits {
    Limits { upload_max_bytes: 2 << 30, default_quota_bytes: 4 << 30, resumable_expiry_secs: 3600 }
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn file_url(&self, name: &str) -> String {
        self.url(&format!("/api/v1/datasets/coco/versions/v1/files/{name}"))
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
    }

    /// A browser-like client signed in as `user`.
    pub async fn browser(&self, user: &str) -> reqwest::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::ORIGIN, format!("http://{}", self.addr).parse().unwrap());
        let client = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            .build()
            .unwrap();
        let res = client
            .post(self.url("/api/login"))
            .form(&[("username", user), ("password", PASSWORD)])
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success() || res.status().is_redirection(), "login: {}", res.status());
        client
    }
}

/// What a raw request got back: status, headers (lowercase names), body.
pub struct Answer {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// Sends `method path` with `headers`, then `len` bytes from `fill`
/// (called with the offset and a buffer), stopping after `cut_at` bytes
/// and closing the socket if given; then reads the answer (None if cut).
pub async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    len: u64,
    cut_at: Option<u64>,
    mut fill: impl FnMut(u64, &mut [u8]),
) -> Option<Answer> {
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {len}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut sent = 0u64;
    let stop = cut_at.unwrap_or(len).min(len);
    while sent < stop {
        let n = ((stop - sent) as usize).min(buf.len());
        fill(sent, &mut buf[..n]);
        if sock.write_all(&buf[..n]).await.is_err() {
            break; // the server answered early (a refusal) and closed
        }
        sent += n as u64;
    }
    if cut_at.is_some() {
        drop(sock);
        return None;
    }
    Some(answer(sock).await)
}

/// Sends `method path` with `headers` and `body` in `Transfer-Encoding:
/// chunked` (no Content-Length: a client that does not say how long its
/// body is), one chunk per piece; then reads the answer.
pub async fn raw_chunked(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    pieces: &[&[u8]],
) -> Answer {
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    for piece in pieces {
        bytes.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        bytes.extend_from_slice(piece);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"0\r\n\r\n");
    let _ = sock.write_all(&bytes).await; // an early answer may close the socket first
    answer(sock).await
}

async fn answer(mut sock: tokio::net::TcpStream) -> Answer {
    let mut text = Vec::new();
    let _ = sock.read_to_end(&mut text).await;
    let text = String::from_utf8_lossy(&text).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer { status, headers, body: body.to_string() }
}

/// Deterministic bytes for offset `at`: any range can be regenerated.
pub fn pattern(at: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        let x = at + i as u64;
        *b = (x ^ (x >> 8) ^ (x >> 17)).wrapping_mul(31) as u8;
    }
}

pub fn pattern_sha(len: u64) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < len {
        let n = ((len - at) as usize).min(buf.len());
        pattern(at, &mut buf[..n]);
        h.update(&buf[..n]);
        at += n as u64;
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

// Not every test binary that includes this module lists files.
#[allow(unused_imports)]
pub use gantry_testkit::files_under;

/// Waits (bounded) until the server has finished with an abandoned upload:
/// its row is gone. The server's clean-up runs in its own task.
pub async fn until_no_uploads(s: &Server) {
    for _ in 0..500 {
        if s.count("SELECT COUNT(*) FROM dataset_uploads").await == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the abandoned upload was not cleaned up within 10 s");
}

/// Resident memory of this process (the server runs in it), in KiB.
pub fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// A directory store that runs a test's step before its next `temp_len`
/// (asking how much of an upload is held), its next `rename_into_place`
/// (moving a copy onto its key) or its next `get` (opening a file): the one
/// moment a race needs.
pub struct Stepped {
    dir: DirStore,
    before_temp_len: std::sync::Mutex<Option<futures_util::future::BoxFuture<'static, ()>>>,
    before_rename: std::sync::Mutex<Option<futures_util::future::BoxFuture<'static, ()>>>,
    before_get: std::sync::Mutex<Option<futures_util::future::BoxFuture<'static, ()>>>,
}

impl Stepped {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Stepped {
            dir: DirStore::new(root),
            before_temp_len: Default::default(),
            before_rename: Default::default(),
            before_get: Default::default(),
        }
    }

    /// `step` runs (once) before the next `temp_len` answers.
    pub fn before_temp_len(&self, step: impl std::future::Future<Output = ()> + Send + 'static) {
        *self.before_temp_len.lock().unwrap() = Some(Box::pin(step));
    }

    /// `step` runs (once) before the next move into place.
    pub fn before_rename(&self, step: impl std::future::Future<Output = ()> + Send + 'static) {
        *self.before_rename.lock().unwrap() = Some(Box::pin(step));
    }

    /// `step` runs (once) before the next `get` opens its file.
    pub fn before_get(&self, step: impl std::future::Future<Output = ()> + Send + 'static) {
        *self.before_get.lock().unwrap() = Some(Box::pin(step));
    }
}

async fn run_step(slot: &std::sync::Mutex<Option<futures_util::future::BoxFuture<'static, ()>>>) {
    let step = slot.lock().unwrap().take();
    if let Some(step) = step {
        step.await;
    }
}

#[gantry_platform::datasets::store::async_trait]
impl Store for Stepped {
    fn describe(&self) -> String {
        "test store".into()
    }
    fn local_dir(&self) -> Option<&std::path::Path> {
        self.dir.local_dir()
    }
    async fn put_temp(&self, temp: &str, offset: u64) -> std::io::Result<Box<dyn TempWriter>> {
        self.dir.put_temp(temp, offset).await
    }
    async fn temp_len(&self, temp: &str) -> std::io::Result<Option<u64>> {
        run_step(&self.before_temp_len).await;
        self.dir.temp_len(temp).await
    }
    async fn rename_into_place(&self, temp: &str, key: &str) -> std::io::Result<()> {
        run_step(&self.before_rename).await;
        self.dir.rename_into_place(temp, key).await
    }
    async fn get(&self, key: &str, range: Option<(u64, u64)>) -> std::io::Result<ByteStream> {
        run_step(&self.before_get).await;
        self.dir.get(key, range).await
    }
    async fn list(&self, prefix: &str) -> std::io::Result<Vec<(String, u64)>> {
        self.dir.list(prefix).await
    }
    async fn delete(&self, key: &str) -> std::io::Result<()> {
        self.dir.delete(key).await
    }
}
