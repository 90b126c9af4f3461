//! A temporary installation for the dataset tests: SQLite file, two
//! groups, a dataset `coco` (images, region local) with version `v1`, and
//! stores in directories (or the ones a test passes); and [`Hooked`], a
//! directory store whose calls a test can make fail, wait or race.
#![allow(dead_code)]

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{future::BoxFuture, stream, Stream};
use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser, User},
    datasets::{
        self,
        store::{ByteStream, DirStore, Store, TempWriter},
        BeginUpload, DatasetError, Datasets, Limits, NewDataset, UploadState,
    },
    db,
};
use sha2::{Digest, Sha256};
use std::{
    collections::HashMap,
    io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};
use tokio::sync::oneshot;

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
    let user = |name: &'static str, group: &'static str| NewUser {
        username: name,
        password: "a-good-password",
        role: Role::User,
        group: Some(group),
    };
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
    Env { dir, pool, alice, carol, stores, central_root, region_root }
}

impl Env {
    /// The local region's directory store (when no other was passed).
    pub fn region_dir(&self) -> PathBuf {
        self.region_root.join("local")
    }

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

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.pool).await.unwrap()
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

pub fn sha(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

// Not every test binary that includes this module lists files.
#[allow(unused_imports)]
pub use gantry_testkit::files_under;

/// A store call not yet started: what a [`Hooked`] store would do. A hook
/// awaits it (after a step of its own), maps what it returns, or drops it
/// unstarted to fail instead.
pub type Call<'a, T> = BoxFuture<'a, io::Result<T>>;

/// A hook: what it does to a store call.
type Hook<T> = Box<dyn for<'a> Fn(Call<'a, T>) -> Call<'a, T> + Send + Sync>;

/// A hook's slot for one kind of call to a [`Hooked`] store; empty, the
/// call goes straight to the directory.
pub struct Slot<T>(Mutex<Option<Hook<T>>>);

impl<T: Send + 'static> Slot<T> {
    /// Every later call goes through `hook` (until it is cleared).
    pub fn set(&self, hook: impl for<'a> Fn(Call<'a, T>) -> Call<'a, T> + Send + Sync + 'static) {
        *self.0.lock().unwrap() = Some(Box::new(hook));
    }
    /// Calls go straight to the directory again.
    pub fn clear(&self) {
        *self.0.lock().unwrap() = None;
    }
    /// The next call goes through `hook`, later ones straight through: the
    /// one moment a race or a gate is about.
    pub fn once(&self, hook: impl for<'a> FnOnce(Call<'a, T>) -> Call<'a, T> + Send + 'static) {
        let hook = Mutex::new(Some(hook));
        self.set(move |call| match hook.lock().unwrap().take() {
            Some(hook) => hook(call),
            None => call,
        });
    }
    /// The next call says it began, waits for the go, and says when it is
    /// done: a test holds it there while something else happens.
    pub fn gate_once(&self) -> Gate {
        let (began, entered) = oneshot::channel();
        let (go, wait_go) = oneshot::channel();
        let (ended, done) = oneshot::channel();
        self.once(move |call| {
            Box::pin(async move {
                let _ = began.send(());
                let _ = wait_go.await;
                let result = call.await;
                let _ = ended.send(());
                result
            })
        });
        Gate { entered, go, done }
    }
    /// Every later call fails with `why`, and the directory is not touched.
    pub fn fail(&self, why: &'static str) {
        self.set(move |_| Box::pin(async move { Err(io::Error::other(why)) }));
    }
    fn run<'a>(&self, call: Call<'a, T>) -> Call<'a, T> {
        match &*self.0.lock().unwrap() {
            Some(hook) => hook(call),
            None => call,
        }
    }
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot(Mutex::new(None))
    }
}

/// The ends of a [`Slot::gate_once`]: told the call began, the go, told it is done.
pub struct Gate {
    pub entered: oneshot::Receiver<()>,
    pub go: oneshot::Sender<()>,
    pub done: oneshot::Receiver<()>,
}

/// A directory store for tests that need one call to fail, wait at a gate
/// or run a racing step: each call goes through its slot's hook, if one is
/// set, and is otherwise the directory's own. `digest`, `delete_prefix`
/// and `copy_to_temp` are the trait's defaults, not the directory's own
/// shortcuts: they go through the hooked `get`, `list` and `delete` (and,
/// without a local directory, `put_temp`), so those hooks reach them too.
pub struct Hooked {
    dir: DirStore,
    name: &'static str,
    local: bool,
    pub on_put_temp: Slot<Box<dyn TempWriter>>,
    pub on_temp_len: Slot<Option<u64>>,
    pub on_rename: Slot<()>,
    pub on_get: Slot<ByteStream>,
    pub on_list: Slot<Vec<(String, u64)>>,
    pub on_delete: Slot<()>,
}

impl Hooked {
    /// `name` is what [`Store::describe`] says; the store tells its
    /// directory as a local one, as a [`DirStore`] does.
    pub fn new(name: &'static str, root: impl Into<PathBuf>) -> Hooked {
        Hooked {
            dir: DirStore::new(root),
            name,
            local: true,
            on_put_temp: Slot::default(),
            on_temp_len: Slot::default(),
            on_rename: Slot::default(),
            on_get: Slot::default(),
            on_list: Slot::default(),
            on_delete: Slot::default(),
        }
    }

    /// Tells no local directory, as an object store: keeping a file aside
    /// copies it through the (hooked) store instead of linking it.
    pub fn without_local_dir(self) -> Hooked {
        Hooked { local: false, ..self }
    }
}

#[async_trait]
impl Store for Hooked {
    fn describe(&self) -> String {
        self.name.into()
    }
    fn local_dir(&self) -> Option<&Path> {
        self.local.then(|| self.dir.root())
    }
    async fn put_temp(&self, temp: &str, offset: u64) -> io::Result<Box<dyn TempWriter>> {
        self.on_put_temp.run(self.dir.put_temp(temp, offset)).await
    }
    async fn temp_len(&self, temp: &str) -> io::Result<Option<u64>> {
        self.on_temp_len.run(self.dir.temp_len(temp)).await
    }
    async fn rename_into_place(&self, temp: &str, key: &str) -> io::Result<()> {
        self.on_rename.run(self.dir.rename_into_place(temp, key)).await
    }
    async fn get(&self, key: &str, range: Option<(u64, u64)>) -> io::Result<ByteStream> {
        self.on_get.run(self.dir.get(key, range)).await
    }
    async fn list(&self, prefix: &str) -> io::Result<Vec<(String, u64)>> {
        self.on_list.run(self.dir.list(prefix)).await
    }
    async fn delete(&self, key: &str) -> io::Result<()> {
        self.on_delete.run(self.dir.delete(key)).await
    }
}

/// A store's writer that fails ("disk on fire") once more than `left`
/// bytes would be written: a store that stops taking an upload partway.
pub struct FailingWriter {
    pub inner: Box<dyn gantry_platform::datasets::store::TempWriter>,
    pub left: u64,
}

#[async_trait]
impl gantry_platform::datasets::store::TempWriter for FailingWriter {
    async fn write(&mut self, chunks: Vec<Bytes>) -> std::io::Result<()> {
        let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        if len > self.left {
            return Err(std::io::Error::other("disk on fire"));
        }
        self.left -= len;
        self.inner.write(chunks).await
    }
    async fn finish(self: Box<Self>) -> std::io::Result<()> {
        self.inner.finish().await
    }
}
