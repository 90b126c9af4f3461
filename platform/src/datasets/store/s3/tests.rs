//! The S3 store against `object_store`'s in-memory bucket, wrapped to
//! count the bytes that pass through the server or are copied inside the
//! bucket: what a resumed upload costs.

use super::*;
use crate::datasets::store::{checksum, hex, TEMP_DIR};
use object_store::{
    memory::InMemory, CopyOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, PutMultipartOptions, PutOptions,
    PutPayload, PutResult,
};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const MIB: usize = 1 << 20;

/// An in-memory bucket that counts bytes read back (`get_opts`, heads
/// aside) and bytes copied inside it (`copy_opts`, which a rename uses).
#[derive(Debug, Default)]
struct Counting {
    inner: InMemory,
    read: AtomicU64,
    copied: AtomicU64,
}

impl Counting {
    fn moved(&self) -> u64 {
        self.read.load(Relaxed) + self.copied.load(Relaxed)
    }
}

impl std::fmt::Display for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "counting {}", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let head = options.head;
        let got = self.inner.get_opts(location, options).await?;
        if !head {
            self.read.fetch_add(got.range.end - got.range.start, Relaxed);
        }
        Ok(got)
    }
    fn delete_stream(
        &self,
        locations: futures_util::stream::BoxStream<'static, object_store::Result<Path>>,
    ) -> futures_util::stream::BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&Path>,
    ) -> futures_util::stream::BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> futures_util::stream::BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        let size = self.inner.head(from).await?.size;
        self.inner.copy_opts(from, to, options).await?;
        self.copied.fetch_add(size, Relaxed);
        Ok(())
    }
}

fn bucket() -> (Arc<Counting>, S3Store) {
    let counting = Arc::new(Counting::default());
    (counting.clone(), S3Store { inner: counting, describe: "an in-memory bucket".into() })
}

/// Bytes that differ from piece to piece and within one.
fn file(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

fn sha(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Appends `data` to temporary object `temp` from `offset`, as one request does.
async fn append(store: &S3Store, temp: &str, offset: usize, data: &[u8]) {
    let mut writer = store.put_temp(temp, offset as u64).await.unwrap();
    writer.write(vec![Bytes::copy_from_slice(data)]).await.unwrap();
    writer.finish().await.unwrap();
}

gantry_testkit::timed_test! {
    async fn a_temporary_object_written_in_64_requests_moves_each_byte_a_bounded_number_of_times() {
        let (counting, store) = bucket();
        let data = file(64 * MIB);
        for (k, piece) in data.chunks(MIB).enumerate() {
            append(&store, "t", k * MIB, piece).await;
        }
        assert_eq!(store.temp_len("t").await.unwrap(), Some(data.len() as u64));
        // Read back as a whole, as placing verifies it.
        let read_back = store.digest(&temp_key("t"), true).await.unwrap();
        assert_eq!((read_back.size, read_back.sha256), (data.len() as u64, Some(sha(&data))));
        let moved = counting.moved();
        assert!(moved < 3 * data.len() as u64, "resuming 64 times moved {} MiB for a {} MiB file", moved / MIB as u64, data.len() / MIB);
    }
}

gantry_testkit::timed_test! {
    async fn a_temporary_object_in_pieces_is_cut_back_resumed_and_removed_whole() {
        let (_, store) = bucket();
        let data = file(10 * MIB + 5);
        append(&store, "t", 0, &data[..3 * MIB]).await;
        append(&store, "t", 3 * MIB, &data[3 * MIB..6 * MIB]).await;
        append(&store, "t", 6 * MIB, &data[6 * MIB..9 * MIB]).await;
        // A failed request's bytes taken back out: cut inside the second piece.
        store.put_temp("t", (4 * MIB) as u64).await.unwrap().finish().await.unwrap();
        assert_eq!(store.temp_len("t").await.unwrap(), Some((4 * MIB) as u64));
        append(&store, "t", 4 * MIB, &data[4 * MIB..]).await;
        assert_eq!(store.temp_len("t").await.unwrap(), Some(data.len() as u64));
        // More than it holds is refused.
        let beyond = store.put_temp("t", data.len() as u64 + 1).await.err().expect("resuming past the end is refused");
        assert_eq!(beyond.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(checksum(&store, &temp_key("t")).await.unwrap(), (data.len() as u64, sha(&data)));
        store.rename_into_place("t", "c/v1/images/f.bin").await.unwrap();
        assert_eq!(checksum(&store, "c/v1/images/f.bin").await.unwrap(), (data.len() as u64, sha(&data)));
        assert_eq!(store.list(TEMP_DIR).await.unwrap(), Vec::<(String, u64)>::new(), "left among the temporary objects");

        // Removing an unfinished upload removes every piece of it, and only its own.
        append(&store, "u", 0, &data[..MIB]).await;
        append(&store, "u", MIB, &data[MIB..2 * MIB]).await;
        append(&store, "u2", 0, &data[..MIB]).await;
        store.delete(&temp_key("u")).await.unwrap();
        assert_eq!(store.temp_len("u").await.unwrap(), None);
        let left: Vec<String> = store.list(TEMP_DIR).await.unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(left, vec![temp_key("u2")]);
    }
}

gantry_testkit::timed_test! {
    async fn pieces_an_interrupted_assembly_left_are_not_counted_again() {
        let (counting, store) = bucket();
        let data = file(4 * MIB);
        append(&store, "t", 0, &data[..MIB]).await;
        append(&store, "t", MIB, &data[MIB..2 * MIB]).await;
        checksum(&store, &temp_key("t")).await.unwrap();
        // The server stopped after assembling, before the piece went.
        let stray = Path::from(format!("{}.part-{:020}", temp_key("t"), MIB));
        counting.inner.put(&stray, Bytes::copy_from_slice(&data[MIB..2 * MIB]).into()).await.unwrap();
        assert_eq!(store.temp_len("t").await.unwrap(), Some((2 * MIB) as u64));
        append(&store, "t", 2 * MIB, &data[2 * MIB..]).await;
        assert_eq!(checksum(&store, &temp_key("t")).await.unwrap(), (data.len() as u64, sha(&data)));
        let left: Vec<String> = store.list(TEMP_DIR).await.unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(left, vec![temp_key("t")]);
    }
}
