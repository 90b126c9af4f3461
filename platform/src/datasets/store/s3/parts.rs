//! A temporary object that several requests wrote. An S3 object cannot be
//! appended to, and copying what is held into a new object at every
//! request would move the file's bytes once per request (quadratic in its
//! pieces). So the first request's bytes are the object itself and each
//! later request's are an object of their own beside it,
//! `{key}.part-{offset}` (20 digits: the bucket lists them in order). A
//! request then writes only its own bytes. Read as a whole — placing
//! verifies it — the pieces are assembled, once, into the object itself:
//! what is verified is the one object that is moved into place.
//!
//! Every function here takes a temporary object's key as the store's
//! calls get it (`.gantry-tmp/{temp}`), not as the bucket spells it.

use super::{io_err, PARTS_IN_FLIGHT};
use futures_util::StreamExt;
use object_store::{path::Path, GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart};
use std::io;

/// S3's bounds on a multipart upload: parts per object, and bytes in each
/// part but the last.
const MAX_PARTS: u64 = 10_000;
const MIN_PART: usize = 5 << 20;

/// Bytes `offset..offset + size` of an upload, in the object at `path`.
struct Piece {
    offset: u64,
    size: u64,
    path: Path,
}

/// What a temporary object is made of in the bucket.
pub(super) struct Pieces {
    /// The size of the object itself: the first request's bytes (all of
    /// them, once assembled).
    first: u64,
    /// The pieces that go on from it, each where the one before ends.
    later: Vec<Piece>,
    /// Pieces that go on from nothing: left by an assembly or a cut that
    /// stopped halfway. Not part of the upload; removed when it is next
    /// written or assembled.
    stray: Vec<Path>,
}

impl Pieces {
    /// The bytes the temporary object holds.
    pub(super) fn held(&self) -> u64 {
        self.later.last().map_or(self.first, |p| p.offset + p.size)
    }
}

/// The object holding the bytes from `offset` on.
pub(super) fn piece_path(key: &str, offset: u64) -> Path {
    Path::from(format!("{key}.part-{offset:020}"))
}

/// Every piece object beside `key`, with its offset (`None`: not a name
/// this store gives). Listed from just before the first of them, and only
/// as far as the last: S3 lists keys in order.
async fn listed(store: &dyn ObjectStore, key: &str) -> io::Result<Vec<(Option<u64>, u64, Path)>> {
    let dir = Path::from(key.rsplit_once('/').map_or("", |(dir, _)| dir));
    let prefix = format!("{}.part-", Path::from(key).as_ref());
    let after = Path::parse(prefix.as_str()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut listing = store.list_with_offset(Some(&dir), &after);
    let mut found = Vec::new();
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(io_err)?;
        let Some(offset) = meta.location.as_ref().strip_prefix(prefix.as_str()) else { break };
        found.push((offset.parse().ok().filter(|_| offset.len() == 20), meta.size, meta.location));
    }
    Ok(found)
}

/// The pieces of the temporary object at `key`; `None` when it holds nothing.
pub(super) async fn pieces(store: &dyn ObjectStore, key: &str) -> io::Result<Option<Pieces>> {
    let first = match store.head(&Path::from(key)).await {
        Ok(meta) => meta.size,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    let mut found = listed(store, key).await?;
    found.sort_by_key(|(offset, _, _)| *offset);
    let mut pieces = Pieces { first, later: Vec::new(), stray: Vec::new() };
    // In order of offset: once one leaves a gap, none after it can close it.
    for (offset, size, path) in found {
        match offset {
            Some(offset) if offset == pieces.held() => pieces.later.push(Piece { offset, size, path }),
            _ => pieces.stray.push(path),
        }
    }
    Ok(Some(pieces))
}

/// Cuts the temporary object at `key` back to its first `offset` bytes
/// (at most what it holds), and removes stray pieces. The last pieces go
/// first, so one that stops halfway leaves the object whole up to some
/// point; a piece or first object that `offset` falls inside is rewritten
/// shorter (at most one request's bytes, unless the first request wrote
/// more).
pub(super) async fn cut(store: &dyn ObjectStore, key: &str, pieces: Pieces, offset: u64) -> io::Result<()> {
    for path in &pieces.stray {
        remove(store, path).await?;
    }
    for piece in pieces.later.iter().rev() {
        if piece.offset >= offset {
            remove(store, &piece.path).await?;
        } else if piece.offset + piece.size > offset {
            rewrite_shorter(store, &piece.path, offset - piece.offset).await?;
        }
    }
    if offset < pieces.first {
        rewrite_shorter(store, &Path::from(key), offset).await?;
    }
    Ok(())
}

/// Makes the object at `key` hold the whole upload: its first bytes and
/// then every piece copied into a new object of the same name, which
/// replaces it only when complete; the pieces go after.
pub(super) async fn assemble(store: &dyn ObjectStore, key: &str) -> io::Result<()> {
    let Some(pieces) = pieces(store, key).await? else { return Ok(()) };
    if !pieces.later.is_empty() {
        let path = Path::from(key);
        // S3 takes at most 10,000 parts: a file past 5 MiB × 10,000 gets larger ones.
        let part = pieces.held().div_ceil(MAX_PARTS).max(MIN_PART as u64) as usize;
        let mut upload = WriteMultipart::new_with_chunk_size(store.put_multipart(&path).await.map_err(io_err)?, part);
        let mut copied = copy_into(store, &path, pieces.first, &mut upload).await;
        for piece in &pieces.later {
            if copied.is_ok() {
                copied = copy_into(store, &piece.path, piece.size, &mut upload).await;
            }
        }
        match copied {
            Ok(()) => drop(upload.finish().await.map_err(io_err)?),
            Err(e) => {
                let _ = upload.abort().await;
                return Err(e);
            }
        }
    }
    for path in pieces.later.iter().map(|p| &p.path).chain(&pieces.stray) {
        remove(store, path).await?;
    }
    Ok(())
}

/// Removes every piece beside `key`, whatever its name says.
pub(super) async fn remove_all(store: &dyn ObjectStore, key: &str) -> io::Result<()> {
    for (_, _, path) in listed(store, key).await? {
        remove(store, &path).await?;
    }
    Ok(())
}

async fn remove(store: &dyn ObjectStore, path: &Path) -> io::Result<()> {
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(io_err(e)),
    }
}

/// The object at `path` cut to its first `len` bytes: a new object of
/// the same name (none at all for 0).
async fn rewrite_shorter(store: &dyn ObjectStore, path: &Path, len: u64) -> io::Result<()> {
    if len == 0 {
        return remove(store, path).await;
    }
    let mut upload = WriteMultipart::new(store.put_multipart(path).await.map_err(io_err)?);
    match copy_into(store, path, len, &mut upload).await {
        Ok(()) => upload.finish().await.map(drop).map_err(io_err),
        Err(e) => {
            let _ = upload.abort().await;
            Err(e)
        }
    }
}

/// Streams the first `len` bytes of the object at `from` into `upload`.
async fn copy_into(store: &dyn ObjectStore, from: &Path, len: u64, upload: &mut WriteMultipart) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let options = GetOptions { range: Some(GetRange::Bounded(0..len)), ..Default::default() };
    let mut bytes = store.get_opts(from, options).await.map_err(io_err)?.into_stream();
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.map_err(io_err)?;
        upload.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(io_err)?;
        upload.put(chunk);
    }
    Ok(())
}
