//! A resumable upload whose request fails partway — a store that stops
//! taking bytes — is not thrown away: it stays at the offset the server
//! held, and told the client, before that request, and goes on from there.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::datasets::{self, store::TempWriter, BeginUpload, UploadState};
use std::sync::Arc;

gantry_testkit::timed_test! {
    async fn a_store_failing_mid_patch_leaves_the_upload_at_its_last_offset() {
        let scratch = tempfile::tempdir().unwrap();
        let region = Arc::new(Hooked::new("flaky test store", scratch.path()));
        let env = env_with(None, Some(region.clone())).await;
        let data = random_bytes(3 << 20);
        let begin = BeginUpload { code: "coco", version: "v1", name: "big.bin", replace: false, total: Some(data.len() as u64), resumable: true };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let first = datasets::write_upload(&env.pool, &upload, 0, body(data[..1 << 20].to_vec(), 64 * 1024), None).await.unwrap();
        assert!(matches!(first, UploadState::Partial { offset, .. } if offset == 1 << 20), "{first:?}");

        // The next request: the region's store takes half a megabyte, then fails.
        region.on_put_temp.once(|put| Box::pin(async move { Ok(Box::new(FailingWriter { inner: put.await?, left: 512 << 10 }) as Box<dyn TempWriter>) }));
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let failed = datasets::write_upload(&env.pool, &upload, 1 << 20, body(data[1 << 20..].to_vec(), 64 * 1024), None).await.unwrap_err();
        assert_eq!(failed.status(), 502, "{failed}");
        let said = failed.to_string();
        assert!(said.contains("the region's store") && said.contains("keeps the 1048576 bytes"), "{said}");
        assert!(!said.contains("disk full") && !said.contains("flaky test store"), "{said}");

        // Still there, at what both stores held before that request.
        let (held, total) = datasets::upload_status(&env.pool, &env.stores, &env.alice, "coco", "v1", "big.bin").await.unwrap();
        assert_eq!((held, total), (1 << 20, data.len() as u64));
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let done = datasets::write_upload(&env.pool, &upload, held, body(data[1 << 20..].to_vec(), 64 * 1024), None).await.unwrap();
        assert!(matches!(done, UploadState::Done(ref f) if f.sha256 == sha(&data)), "{done:?}");
    }
}
