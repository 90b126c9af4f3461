//! A temporary installation for the dataset tests: SQLite file, two
//! groups, a dataset `coco` (images, region local) with version `v1`, and
//! stores in directories (or the ones a test passes).
#![allow(dead_code)]

use bytes::Bytes;
use futures_util::{stream, Stream};
use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser, User},
    datasets::{
        self,
        store::{DirStore, Store},
        BeginUpload, DatasetError, Datasets, Limits, NewDataset, UploadState,
    },
    db,
};
use sha2::{Digest, Sha256};
use std::{collections::HashMap, io, path::{Path, PathBuf}, sync::Arc};

pub struct Env {
    pub dir: tempfile::TempDir,
    pub pool: db::Pool,
    pub alice: User,
    /// In another group.
    pub carol: User,
    pub stores: Datasets,
    pub central_root: PathBuf,
    pub region_root: PathBuf,
}

pub async fn env() -> Env {
    env_with(None, None).await
}

/// `central`/`region`: stores to use instead of directories in the temp dir.
pub async fn env_with(central: Option<Arc<dyn Store>>, region: Option<Arc<dyn Store>>) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let pool = db::connect_file(&dir.path().join("gantry.db")).await.unwrap();
    db::migrate(&pool).await.unwrap();
    accounts::create_group(&pool, None, "ml", 4).await.unwrap();
    accounts::create_group(&pool, None, "other", 4).await.unwrap();
    let user = |name: &'static str, group: &'static str| NewUser { username: name, password: "a-good-password", role: Role::User, group: Some(group) };
    let alice = accounts::create_user(&pool, None, user("alice", "ml")).await.unwrap();
    let carol = accounts::create_user(&pool, None, user("carol", "other")).await.unwrap();
    let central_root = dir.path().join("central");
    let region_root = dir.path().join("regions");
    let central = central.unwrap_or_else(|| Arc::new(DirStore::new(&central_root)));
    let mut regions: HashMap<String, Arc<dyn Store>> = HashMap::new();
    if let Some(r) = region {
        regions.insert("local".into(), r);
    }
    let limits = Limits { upload_max_bytes: 4 << 30, default_quota_bytes: 8 << 30, resumable_expiry_secs: 3600 };
    let stores = Datasets::new(central, regions, Some(region_root.clone()), limits);
    let new = NewDataset { code: "coco", name: "COCO", region: "local", category: "images", description: "", visibility: "group" };
    datasets::create_dataset(&pool, &alice, &new).await.unwrap();
    datasets::create_version(&pool, &alice, "coco", "v1").await.unwrap();
    Env { dir, pool, alice, carol, stores, central_root, region_root }
}

impl Env {
    /// The local region's directory store (when no other was passed).
    pub fn region_dir(&self) -> PathBuf {
        self.region_root.join("local")
    }

    pub async fn put(&self, name: &str, data: &[u8]) -> Result<UploadState, DatasetError> {
        let begin = BeginUpload { code: "coco", version: "v1", name, replace: false, total: Some(data.len() as u64), resumable: false };
        let upload = datasets::begin_upload(&self.pool, &self.stores, &self.alice, &begin).await?;
        datasets::write_upload(&self.pool, &upload, 0, body(data.to_vec(), 64 * 1024), None).await
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
    }
}

/// `data` in chunks, as a request body arrives.
pub fn body(data: Vec<u8>, chunk: usize) -> impl Stream<Item = io::Result<Bytes>> + Unpin + Send {
    let data = Bytes::from(data);
    let chunks: Vec<io::Result<Bytes>> = (0..data.len()).step_by(chunk.max(1)).map(|i| Ok(data.slice(i..(i + chunk).min(data.len())))).collect();
    stream::iter(chunks)
}

/// The first `at` bytes of `data`, then the connection breaks.
pub fn cut_body(data: &[u8], at: usize) -> impl Stream<Item = io::Result<Bytes>> + Unpin + Send {
    let mut chunks: Vec<io::Result<Bytes>> = data[..at].chunks(64 * 1024).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    chunks.push(Err(io::Error::new(io::ErrorKind::ConnectionReset, "connection reset by peer")));
    stream::iter(chunks)
}

pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    for chunk in v.chunks_mut(8) {
        let r: u64 = rand::random();
        chunk.copy_from_slice(&r.to_le_bytes()[..chunk.len()]);
    }
    v
}

pub fn sha(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// Every file under `root`, relative, sorted.
pub fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}
