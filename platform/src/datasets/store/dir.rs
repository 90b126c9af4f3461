//! A store in a directory of the local file system — a plain disk, or a
//! JuiceFS (or any other) mount. Temporary files sit under the same root,
//! so placing one is a `rename` within one file system: atomic.

use super::{check_key, temp_key, ByteStream, Hashes, ReadBack, Store, TempWriter, TEMP_DIR};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream;
use std::{
    fs::{self, File, OpenOptions},
    io::{self, IoSlice, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
};

/// Bytes read per chunk of a download or read-back.
const READ_CHUNK: usize = 1 << 20;

/// The read-back buffer: small enough to stay in a core's cache between
/// the copy out of the page cache and the hashing.
const DIGEST_BUF: usize = 256 << 10;

/// Written bytes handed to the kernel's writeback this often, so the fsync
/// at the end of an upload finds them mostly on disk already.
const WRITEBACK_EVERY: u64 = 16 << 20;

#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirStore { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> io::Result<PathBuf> {
        check_key(key)?;
        Ok(self.root.join(key))
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(io::Error::other)?
}

#[async_trait]
impl Store for DirStore {
    fn describe(&self) -> String {
        format!("directory {}", self.root.display())
    }

    fn local_dir(&self) -> Option<&Path> {
        Some(&self.root)
    }

    async fn put_temp(&self, temp: &str, offset: u64) -> io::Result<Box<dyn TempWriter>> {
        let path = self.path(&temp_key(temp))?;
        let dir = self.root.join(TEMP_DIR);
        let file = blocking(move || {
            fs::create_dir_all(&dir)?;
            let mut file = OpenOptions::new().create(true).write(true).truncate(offset == 0).open(&path)?;
            if offset > 0 {
                let held = file.metadata()?.len();
                if held < offset {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("holds {held} bytes, not {offset}"),
                    ));
                }
                file.set_len(offset)?;
                file.seek(SeekFrom::Start(offset))?;
            }
            Ok(file)
        })
        .await?;
        Ok(Box::new(DirWriter { file: Some(file), at: offset, unhinted: 0 }))
    }

    async fn temp_len(&self, temp: &str) -> io::Result<Option<u64>> {
        match tokio::fs::metadata(self.path(&temp_key(temp))?).await {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn rename_into_place(&self, temp: &str, key: &str) -> io::Result<()> {
        let from = self.path(&temp_key(temp))?;
        let to = self.path(key)?;
        blocking(move || {
            let parent = to.parent().ok_or_else(|| io::Error::other("a key names a folder"))?;
            // Folders made now for the key ({dataset}/{version}/{category}).
            let made: Vec<PathBuf> = parent.ancestors().take_while(|d| !d.exists()).map(Path::to_path_buf).collect();
            fs::create_dir_all(parent)?;
            fs::rename(&from, &to)?;
            // The new names on disk before the file is listed: the data was
            // synced when written, the directory entries only now. (On the
            // database's file system its next commit would carry them
            // along; a store on another disk or a JuiceFS mount has no
            // such luck.)
            let synced = sync_dir(parent).and_then(|()| made.iter().filter_map(|d| d.parent()).try_for_each(sync_dir));
            if synced.is_err() {
                // The caller reports "nothing was kept": make it so.
                let _ = fs::remove_file(&to);
            }
            synced
        })
        .await
    }

    async fn get(&self, key: &str, range: Option<(u64, u64)>) -> io::Result<ByteStream> {
        let path = self.path(key)?;
        let (file, remaining) = blocking(move || {
            let mut file = File::open(&path)?;
            let size = file.metadata()?.len();
            let (start, len) = match range {
                Some((start, end)) => (start, end.min(size.saturating_sub(1)).saturating_add(1).saturating_sub(start)),
                None => (0, size),
            };
            file.seek(SeekFrom::Start(start))?;
            Ok((file, len))
        })
        .await?;
        Ok(Box::pin(stream::try_unfold((Some(file), remaining), |(file, remaining)| async move {
            let Some(mut file) = file else { return Ok(None) };
            if remaining == 0 {
                return Ok(None);
            }
            let want = remaining.min(READ_CHUNK as u64) as usize;
            let (file, chunk) = blocking(move || {
                // Into spare capacity: no zeroing of a buffer about to be overwritten.
                let mut buf = Vec::with_capacity(want);
                (&mut file).take(want as u64).read_to_end(&mut buf)?;
                Ok((file, Bytes::from(buf)))
            })
            .await?;
            if chunk.is_empty() {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file is shorter than it was"));
            }
            let left = remaining - chunk.len() as u64;
            Ok(Some((chunk, (Some(file), left))))
        })))
    }

    /// One blocking loop through a small buffer that is reused: no buffer
    /// per chunk to allocate and fault in, and the bytes are hashed while
    /// they are still in the CPU's cache.
    async fn digest(&self, key: &str, with_sha256: bool) -> io::Result<ReadBack> {
        let path = self.path(key)?;
        blocking(move || {
            let mut file = File::open(&path)?;
            let mut hashes = Hashes::new(with_sha256);
            let mut buf = vec![0u8; DIGEST_BUF];
            loop {
                match file.read(&mut buf) {
                    Ok(0) => return Ok(hashes.finish()),
                    Ok(n) => hashes.update(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        })
        .await
    }

    async fn list(&self, prefix: &str) -> io::Result<Vec<(String, u64)>> {
        let root = self.root.clone();
        let start = if prefix.is_empty() { root.clone() } else { self.path(prefix.trim_end_matches('/'))? };
        blocking(move || {
            let mut out = Vec::new();
            let mut todo = vec![start];
            while let Some(dir) = todo.pop() {
                let entries = match fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                for entry in entries {
                    let entry = entry?;
                    let kind = entry.file_type()?;
                    if kind.is_dir() {
                        todo.push(entry.path());
                    } else if kind.is_file() {
                        let rel =
                            entry.path().strip_prefix(&root).map_err(io::Error::other)?.to_string_lossy().into_owned();
                        out.push((rel, entry.metadata()?.len()));
                    }
                }
            }
            out.sort();
            Ok(out)
        })
        .await
    }

    async fn delete(&self, key: &str) -> io::Result<()> {
        let path = self.path(key)?;
        let root = self.root.clone();
        blocking(move || {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            // Empty folders left behind go too (not the root, not the temp folder).
            let mut dir = path.parent().map(Path::to_path_buf);
            while let Some(d) = dir {
                if d == root || d == root.join(TEMP_DIR) || fs::remove_dir(&d).is_err() {
                    break;
                }
                dir = d.parent().map(Path::to_path_buf);
            }
            Ok(())
        })
        .await
    }

    async fn delete_prefix(&self, prefix: &str) -> io::Result<()> {
        let path = self.path(prefix.trim_end_matches('/'))?;
        blocking(move || match fs::remove_dir_all(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        })
        .await
    }
}

struct DirWriter {
    file: Option<File>,
    /// Where the next write goes.
    at: u64,
    /// Bytes before `at` not yet handed to writeback.
    unhinted: u64,
}

#[async_trait]
impl TempWriter for DirWriter {
    async fn write(&mut self, chunks: Vec<Bytes>) -> io::Result<()> {
        let mut file = self.file.take().ok_or_else(|| io::Error::other("write after a failed write"))?;
        let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        let (at, unhinted) = (self.at + len, self.unhinted + len);
        let hint = unhinted >= WRITEBACK_EVERY;
        let file = blocking(move || {
            write_all_vectored(&mut file, &chunks)?;
            if hint {
                start_writeback(&file, at - unhinted, unhinted);
            }
            Ok(file)
        })
        .await?;
        self.file = Some(file);
        (self.at, self.unhinted) = (at, if hint { 0 } else { unhinted });
        Ok(())
    }

    async fn finish(mut self: Box<Self>) -> io::Result<()> {
        let file = self.file.take().ok_or_else(|| io::Error::other("finish after a failed write"))?;
        // On disk before the file is listed: a crash after the rename must
        // not leave an empty file under a listed name.
        blocking(move || file.sync_data()).await
    }
}

/// Makes a directory's entries durable. A file system that cannot sync a
/// directory (some answer "invalid argument") has nothing more to offer.
fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir)?.sync_all() {
        Err(e) if e.kind() == io::ErrorKind::InvalidInput || e.kind() == io::ErrorKind::Unsupported => Ok(()),
        other => other,
    }
}

/// Every byte of `chunks`, in order, in as few `writev` calls as the
/// kernel allows (at most 1,024 pieces per call).
fn write_all_vectored(file: &mut File, chunks: &[Bytes]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = chunks.iter().filter(|c| !c.is_empty()).map(|c| IoSlice::new(c)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let take = rest.len().min(1024);
        match file.write_vectored(&rest[..take]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the file took no more bytes")),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Asks the kernel to start writing `len` bytes from `start` to disk now,
/// without waiting: writeback overlaps the rest of the upload instead of
/// all of it landing in the final fsync (which for two 2 GiB copies took a
/// second here). Only a hint: an error changes nothing, the fsync decides.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, start: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain system call on a descriptor we own; no memory passed.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            start as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _start: u64, _len: u64) {}
