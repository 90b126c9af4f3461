//! A dataset store whose calls a test can make fail, wait at a gate, or
//! precede with a step of its own (a racing delete, a cancel): a directory
//! store with a hook slot per kind of call.

use bytes::Bytes;
use futures_util::future::BoxFuture;
use gantry_platform::datasets::store::{async_trait, ByteStream, DirStore, Store, TempWriter};
use std::{
    io,
    path::{Path, PathBuf},
    sync::Mutex,
};
use tokio::sync::oneshot;

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
    /// `step` runs (once) before the next call starts; later calls go
    /// straight through: the one moment a race needs.
    pub fn before_once(&self, step: impl std::future::Future<Output = ()> + Send + 'static) {
        self.once(move |call| {
            Box::pin(async move {
                step.await;
                call.await
            })
        });
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
    pub inner: Box<dyn TempWriter>,
    pub left: u64,
}

#[async_trait]
impl TempWriter for FailingWriter {
    async fn write(&mut self, chunks: Vec<Bytes>) -> io::Result<()> {
        let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        if len > self.left {
            return Err(io::Error::other("disk on fire"));
        }
        self.left -= len;
        self.inner.write(chunks).await
    }
    async fn finish(self: Box<Self>) -> io::Result<()> {
        self.inner.finish().await
    }
}
