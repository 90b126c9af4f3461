//! A store in an S3-compatible bucket through `object_store` (tested
//! against the JuiceFS S3 gateway; MinIO and AWS speak the same API).
//! Temporary objects are multipart uploads completed when their writer
//! finishes; an object cannot be appended to, so resuming at `offset`
//! writes that request's bytes as an object of their own, assembled with
//! the others once the upload is read back whole ([`parts`]). A cut
//! connection therefore loses what it sent since its request began:
//! resumable clients send chunks.

mod parts;

use super::{check_key, temp_key, ByteStream, Store, TempWriter, TEMP_DIR};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::{
    aws::AmazonS3Builder, path::Path, GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart,
};
use std::{io, sync::Arc};

/// Parts in flight per upload: bounds memory (5 MiB parts).
const PARTS_IN_FLIGHT: usize = 2;

#[derive(Debug, Clone)]
pub struct S3Config {
    /// `http://127.0.0.1:9100`; plain HTTP is allowed (a gateway on loopback).
    pub endpoint: String,
    pub bucket: String,
    pub access_key: String,
    pub secret_key: String,
    pub region: String,
}

#[derive(Debug, Clone)]
pub struct S3Store {
    inner: Arc<dyn ObjectStore>,
    describe: String,
}

fn io_err(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e.to_string()),
        other => io::Error::other(other.to_string()),
    }
}

impl S3Store {
    pub fn connect(cfg: &S3Config) -> io::Result<Self> {
        // reqwest is built without a default TLS provider; ring is it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let inner = AmazonS3Builder::new()
            .with_endpoint(&cfg.endpoint)
            .with_bucket_name(&cfg.bucket)
            .with_access_key_id(&cfg.access_key)
            .with_secret_access_key(&cfg.secret_key)
            .with_region(&cfg.region)
            .with_allow_http(true)
            // The JuiceFS gateway's DeleteObjects answer lacks the `Key`
            // object_store expects; single deletes work everywhere.
            .with_disable_bulk_delete(true)
            .build()
            .map_err(io_err)?;
        Ok(S3Store { inner: Arc::new(inner), describe: format!("S3 bucket {} at {}", cfg.bucket, cfg.endpoint) })
    }

    fn path(key: &str) -> io::Result<Path> {
        check_key(key)?;
        Ok(Path::from(key))
    }

    /// Every object under `prefix`, as the bucket names it.
    async fn list_paths(&self, prefix: &str) -> io::Result<Vec<(Path, u64)>> {
        let prefix = if prefix.is_empty() { None } else { Some(Self::path(prefix.trim_end_matches('/'))?) };
        self.inner.list(prefix.as_ref()).map_ok(|m| (m.location, m.size)).try_collect().await.map_err(io_err)
    }
}

/// The key [`S3Store::path`] made `path` from: every segment
/// percent-decoded. `Path::from` encodes `%` itself, so decoding undoes
/// exactly what it did; a segment that does not decode to UTF-8 (an
/// object some other client named) is left as it is.
fn key_of(path: &Path) -> String {
    let segments: Vec<String> = path.parts().map(|part| percent_decode(part.as_ref())).collect();
    segments.join("/")
}

fn percent_decode(segment: &str) -> String {
    gantry_core::url::decode_segment(segment).unwrap_or_else(|| segment.to_string())
}

#[async_trait]
impl Store for S3Store {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    /// Writes only this request's bytes: from 0 the object itself, from
    /// further on a piece beside it, after what is held beyond `offset`
    /// is cut off.
    async fn put_temp(&self, temp: &str, offset: u64) -> io::Result<Box<dyn TempWriter>> {
        let key = temp_key(temp);
        let first = Self::path(&key)?;
        let target = if offset == 0 {
            parts::remove_all(self.inner.as_ref(), &key).await?;
            first
        } else {
            let pieces = parts::pieces(self.inner.as_ref(), &key).await?;
            let pieces =
                pieces.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no temporary object {key}")))?;
            let held = pieces.held();
            if held < offset {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("holds {held} bytes, not {offset}")));
            }
            parts::cut(self.inner.as_ref(), &key, pieces, offset).await?;
            parts::piece_path(&key, offset)
        };
        let upload = self.inner.put_multipart(&target).await.map_err(io_err)?;
        Ok(Box::new(Writer { upload: Some(WriteMultipart::new(upload)), piece: offset > 0, written: 0 }))
    }

    async fn temp_len(&self, temp: &str) -> io::Result<Option<u64>> {
        let key = temp_key(temp);
        check_key(&key)?;
        Ok(parts::pieces(self.inner.as_ref(), &key).await?.map(|p| p.held()))
    }

    async fn rename_into_place(&self, temp: &str, key: &str) -> io::Result<()> {
        let (from, to) = (Self::path(&temp_key(temp))?, Self::path(key)?);
        parts::assemble(self.inner.as_ref(), &temp_key(temp)).await?;
        self.inner.rename(&from, &to).await.map_err(io_err)
    }

    /// A copy inside the bucket: the bytes do not pass through the server.
    async fn copy_to_temp(&self, key: &str, temp: &str) -> io::Result<bool> {
        match self.inner.copy(&Self::path(key)?, &Self::path(&temp_key(temp))?).await {
            Ok(()) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(io_err(e)),
        }
    }

    /// A temporary object written in pieces is assembled first: read
    /// back whole (verified), it is then the one object moved into place.
    async fn get(&self, key: &str, range: Option<(u64, u64)>) -> io::Result<ByteStream> {
        let path = Self::path(key)?;
        if is_temp(key) {
            parts::assemble(self.inner.as_ref(), key).await?;
        }
        let options =
            GetOptions { range: range.map(|(start, end)| GetRange::Bounded(start..end + 1)), ..Default::default() };
        let result = self.inner.get_opts(&path, options).await.map_err(io_err)?;
        Ok(result.into_stream().map_err(io_err).boxed())
    }

    /// Keys as the other calls take them: a listing answers the object's
    /// name as stored, with the characters `object_store` percent-encodes
    /// in a key (`[`, `%`, `~`, non-ASCII…) still encoded; handed back to
    /// [`Store::delete`] or [`Store::get`] as it is, it would be encoded
    /// twice and name no object.
    async fn list(&self, prefix: &str) -> io::Result<Vec<(String, u64)>> {
        let mut out: Vec<(String, u64)> =
            self.list_paths(prefix).await?.into_iter().map(|(p, size)| (key_of(&p), size)).collect();
        out.sort();
        Ok(out)
    }

    /// Deletes the listed objects themselves, whatever their names: no key
    /// is rebuilt from a listing on the way.
    async fn delete_prefix(&self, prefix: &str) -> io::Result<()> {
        for (path, _) in self.list_paths(prefix).await? {
            match self.inner.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        Ok(())
    }

    /// A temporary object goes with its pieces, the later ones first.
    async fn delete(&self, key: &str) -> io::Result<()> {
        let path = Self::path(key)?;
        if is_temp(key) {
            parts::remove_all(self.inner.as_ref(), key).await?;
        }
        match self.inner.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(io_err(e)),
        }
    }
}

fn is_temp(key: &str) -> bool {
    key.strip_prefix(TEMP_DIR).is_some_and(|rest| rest.starts_with('/'))
}

struct Writer {
    upload: Option<WriteMultipart>,
    /// A piece after the first request's bytes: one that got none is not
    /// made at all.
    piece: bool,
    written: u64,
}

#[async_trait]
impl TempWriter for Writer {
    async fn write(&mut self, chunks: Vec<Bytes>) -> io::Result<()> {
        let upload = self.upload.as_mut().ok_or_else(|| io::Error::other("write after finish"))?;
        upload.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(io_err)?;
        for chunk in chunks {
            self.written += chunk.len() as u64;
            upload.put(chunk);
        }
        Ok(())
    }

    async fn finish(mut self: Box<Self>) -> io::Result<()> {
        let upload = self.upload.take().ok_or_else(|| io::Error::other("finished twice"))?;
        if self.piece && self.written == 0 {
            return upload.abort().await.map_err(io_err);
        }
        upload.finish().await.map(drop).map_err(io_err)
    }
}

impl Drop for Writer {
    /// An unfinished multipart upload is aborted, so the bucket keeps no parts.
    fn drop(&mut self) {
        if let Some(upload) = self.upload.take() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = upload.abort().await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests;
