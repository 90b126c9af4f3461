//! A temporary installation for the dataset tests: two groups (`ml`,
//! `other`), alice in the first and carol in the second, a dataset `coco`
//! (images, region `local`, group visibility) with version `v1`, and stores
//! in directories (or the ones a test passes); and the bodies and digests
//! those tests send and compare.

use crate::install::Install;
use bytes::Bytes;
use futures_util::{stream, Stream};
use gantry_core::Role;
use gantry_platform::{
    accounts::User,
    datasets::{
        self,
        store::{DirStore, Store},
        BeginUpload, DatasetError, Datasets, Limits, NewDataset, UploadState,
    },
    db, tokens,
};
use sha2::{Digest, Sha256};
use std::{collections::HashMap, io, path::PathBuf, sync::Arc};

/// Alice's and carol's password.
pub const PASSWORD: &str = "a-good-password";

/// What [`Coco::new`] made.
pub struct Coco {
    pub dir: tempfile::TempDir,
    pub pool: db::Pool,
    pub alice: User,
    /// In another group.
    pub carol: User,
    /// Alice's and carol's API tokens (named "laptop" and "ci"), when asked for.
    pub tokens: Option<(String, String)>,
    pub stores: Datasets,
    /// The central store's directory (when no other store was passed).
    pub central_root: PathBuf,
    /// The regions' directories: the local region's is `local` in it.
    pub region_root: PathBuf,
}

/// What to build a [`Coco`] installation with.
pub struct Options {
    pub limits: Limits,
    /// The central store instead of the directory at `central_root`.
    pub central: Option<Arc<dyn Store>>,
    /// Region `local`'s store instead of the directory in `region_root`.
    pub region: Option<Arc<dyn Store>>,
    /// Alice and carol each get an API token (made before the dataset).
    pub tokens: bool,
}

impl Coco {
    pub async fn new(options: Options) -> Coco {
        let install = Install::new().await;
        install.group("ml", 4).await;
        install.group("other", 4).await;
        let alice = install.user("alice", PASSWORD, Role::User, Some("ml")).await;
        let carol = install.user("carol", PASSWORD, Role::User, Some("other")).await;
        let tokens = match options.tokens {
            true => {
                let (_, alice_token) = tokens::create(&install.pool, &alice, "laptop").await.unwrap();
                let (_, carol_token) = tokens::create(&install.pool, &carol, "ci").await.unwrap();
                Some((alice_token, carol_token))
            }
            false => None,
        };
        let central_root = install.path().join("central");
        let region_root = install.path().join("regions");
        let central = options.central.unwrap_or_else(|| Arc::new(DirStore::new(&central_root)));
        let mut regions: HashMap<String, Arc<dyn Store>> = HashMap::new();
        if let Some(r) = options.region {
            regions.insert("local".into(), r);
        }
        let stores = Datasets::new(central, regions, Some(region_root.clone()), options.limits);
        let new = NewDataset {
            code: "coco",
            name: "COCO",
            region: "local",
            category: "images",
            description: "",
            visibility: "group",
        };
        datasets::create_dataset(&install.pool, &alice, &new).await.unwrap();
        datasets::create_version(&install.pool, &alice, "coco", "v1").await.unwrap();
        let Install { dir, pool } = install;
        Coco { dir, pool, alice, carol, tokens, stores, central_root, region_root }
    }

    /// The local region's directory store (when no other was passed).
    pub fn region_dir(&self) -> PathBuf {
        self.region_root.join("local")
    }

    /// Uploads `data` as `name` into coco v1, as alice, in one go.
    pub async fn put(&self, name: &str, data: &[u8]) -> Result<UploadState, DatasetError> {
        let begin = BeginUpload {
            code: "coco",
            version: "v1",
            name,
            replace: false,
            total: Some(data.len() as u64),
            resumable: false,
        };
        let upload = datasets::begin_upload(&self.pool, &self.stores, &self.alice, &begin).await?;
        datasets::write_upload(&self.pool, &upload, 0, body(data.to_vec(), 64 * 1024), None).await
    }

    /// The one integer `sql` selects.
    pub async fn count(&self, sql: &str) -> i64 {
        crate::install::count(&self.pool, sql).await
    }
}

/// `data` in chunks, as a request body arrives.
pub fn body(data: Vec<u8>, chunk: usize) -> impl Stream<Item = io::Result<Bytes>> + Unpin + Send {
    let data = Bytes::from(data);
    let chunks: Vec<io::Result<Bytes>> =
        (0..data.len()).step_by(chunk.max(1)).map(|i| Ok(data.slice(i..(i + chunk).min(data.len())))).collect();
    stream::iter(chunks)
}

/// The first `at` bytes of `data`, then the connection breaks.
pub fn cut_body(data: &[u8], at: usize) -> impl Stream<Item = io::Result<Bytes>> + Unpin + Send {
    let mut chunks: Vec<io::Result<Bytes>> =
        data[..at].chunks(64 * 1024).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
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

/// SHA-256 of `data`, in lowercase hex.
pub fn sha(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// Deterministic bytes for offset `at`: any range can be regenerated.
pub fn pattern(at: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        let x = at + i as u64;
        *b = (x ^ (x >> 8) ^ (x >> 17)).wrapping_mul(31) as u8;
    }
}

/// SHA-256 of the first `len` bytes of [`pattern`], in lowercase hex.
pub fn pattern_sha(len: u64) -> String {
    let mut h = Sha256::new();
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

#[cfg(feature = "server")]
pub use served::*;

/// The same installation behind the real router, with API tokens, for the
/// server's dataset tests.
#[cfg(feature = "server")]
mod served {
    use super::{Coco, Options, PASSWORD};
    use crate::serve::Served;
    use gantry_platform::{
        accounts::User,
        datasets::{store::Store, Limits},
        db,
    };
    use gantry_server::router;
    use std::{net::SocketAddr, path::PathBuf, sync::Arc};

    pub struct Server {
        pub dir: tempfile::TempDir,
        pub addr: SocketAddr,
        pub pool: db::Pool,
        pub alice: User,
        pub carol: User,
        pub alice_token: String,
        pub carol_token: String,
        /// The central store's directory.
        pub central: PathBuf,
        /// Region `local`'s directory.
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
        central: Option<Arc<dyn Store>>,
        region: Option<Arc<dyn Store>>,
    ) -> Server {
        let coco = Coco::new(Options { limits, central, region, tokens: true }).await;
        let region = coco.region_dir();
        let Coco { dir, pool, alice, carol, tokens, stores, central_root, .. } = coco;
        let (alice_token, carol_token) = tokens.expect("asked for");
        let router_pool = pool.clone();
        let served = Served::start(dir.path().join("site"), false, |opts| async move {
            router::build(opts, router_pool).await.unwrap().layer(axum::Extension(stores))
        })
        .await;
        Server { dir, addr: served.addr, pool, alice, carol, alice_token, carol_token, central: central_root, region }
    }

    /// Uploads up to 2 GiB, 4 GiB per group, resumable ones kept an hour.
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
            crate::install::count(&self.pool, sql).await
        }

        /// A browser-like client signed in as `user`.
        pub async fn browser(&self, user: &str) -> reqwest::Client {
            crate::serve::signed_in(self.addr, user, PASSWORD).await
        }
    }

    /// Waits (bounded) until the server has finished with an abandoned
    /// upload: its row is gone. The server's clean-up runs in its own task.
    pub async fn until_no_uploads(s: &Server) {
        for _ in 0..500 {
            if s.count("SELECT COUNT(*) FROM dataset_uploads").await == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the abandoned upload was not cleaned up within 10 s");
    }
}
