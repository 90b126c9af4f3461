//! A store in an S3-compatible bucket through `object_store` (tested
//! against the JuiceFS S3 gateway; MinIO and AWS speak the same API).
//! Temporary objects are multipart uploads completed when their writer
//! finishes; an object cannot be appended to, so resuming at `offset`
//! writes a new temporary object that starts with the old one's first
//! `offset` bytes (read back through the server) and replaces it when
//! finished. A cut connection therefore loses
//! what it sent since its request began: resumable clients send chunks.

use super::{check_key, temp_key, ByteStream, Store, TempWriter};
use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::{aws::AmazonS3Builder, path::Path, GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart};
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
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| segment.to_string())
}

#[async_trait]
impl Store for S3Store {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn put_temp(&self, temp: &str, offset: u64) -> io::Result<Box<dyn TempWriter>> {
        let final_path = Self::path(&temp_key(temp))?;
        let (target, carry) = if offset == 0 {
            (final_path.clone(), None)
        } else {
            let held = self.inner.head(&final_path).await.map_err(io_err)?.size;
            if held < offset {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("holds {held} bytes, not {offset}")));
            }
            (Self::path(&temp_key(&format!("{temp}.next")))?, Some(offset))
        };
        let upload = self.inner.put_multipart(&target).await.map_err(io_err)?;
        let mut writer = Writer { store: self.inner.clone(), upload: Some(WriteMultipart::new(upload)), target, final_path };
        if let Some(offset) = carry {
            let mut old = self.get(&temp_key(temp), Some((0, offset - 1))).await?;
            while let Some(chunk) = old.next().await {
                writer.write(vec![chunk?]).await?;
            }
        }
        Ok(Box::new(writer))
    }

    async fn temp_len(&self, temp: &str) -> io::Result<Option<u64>> {
        match self.inner.head(&Self::path(&temp_key(temp))?).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(io_err(e)),
        }
    }

    async fn rename_into_place(&self, temp: &str, key: &str) -> io::Result<()> {
        self.inner.rename(&Self::path(&temp_key(temp))?, &Self::path(key)?).await.map_err(io_err)
    }

    /// A copy inside the bucket: the bytes do not pass through the server.
    async fn copy_to_temp(&self, key: &str, temp: &str) -> io::Result<bool> {
        match self.inner.copy(&Self::path(key)?, &Self::path(&temp_key(temp))?).await {
            Ok(()) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(io_err(e)),
        }
    }

    async fn get(&self, key: &str, range: Option<(u64, u64)>) -> io::Result<ByteStream> {
        let options = GetOptions { range: range.map(|(start, end)| GetRange::Bounded(start..end + 1)), ..Default::default() };
        let result = self.inner.get_opts(&Self::path(key)?, options).await.map_err(io_err)?;
        Ok(result.into_stream().map_err(io_err).boxed())
    }

    /// Keys as the other calls take them: a listing answers the object's
    /// name as stored, with the characters `object_store` percent-encodes
    /// in a key (`[`, `%`, `~`, non-ASCII…) still encoded; handed back to
    /// [`Store::delete`] or [`Store::get`] as it is, it would be encoded
    /// twice and name no object.
    async fn list(&self, prefix: &str) -> io::Result<Vec<(String, u64)>> {
        let mut out: Vec<(String, u64)> = self.list_paths(prefix).await?.into_iter().map(|(p, size)| (key_of(&p), size)).collect();
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

    async fn delete(&self, key: &str) -> io::Result<()> {
        match self.inner.delete(&Self::path(key)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(io_err(e)),
        }
    }
}

struct Writer {
    store: Arc<dyn ObjectStore>,
    upload: Option<WriteMultipart>,
    /// Where the parts go, and where the object must end up.
    target: Path,
    final_path: Path,
}

#[async_trait]
impl TempWriter for Writer {
    async fn write(&mut self, chunks: Vec<Bytes>) -> io::Result<()> {
        let upload = self.upload.as_mut().ok_or_else(|| io::Error::other("write after finish"))?;
        upload.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(io_err)?;
        for chunk in chunks {
            upload.put(chunk);
        }
        Ok(())
    }

    async fn finish(mut self: Box<Self>) -> io::Result<()> {
        let upload = self.upload.take().ok_or_else(|| io::Error::other("finished twice"))?;
        upload.finish().await.map_err(io_err)?;
        if self.target != self.final_path {
            self.store.rename(&self.target, &self.final_path).await.map_err(io_err)?;
        }
        Ok(())
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
