//! The central store on a real JuiceFS volume (SQLite metadata, local-disk
//! objects), started by `scripts/juicefs.sh`: the directory store on its
//! FUSE mount, and the S3 store against `juicefs gateway` over the same
//! volume — checksums, a cut upload leaving nothing, a resumed upload, and
//! files put over S3 appearing in the mount. Needs the juicefs binary
//! (`scripts/setup.sh` installs it), root and a usable /dev/fuse.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::datasets::{
    self,
    store::{DirStore, S3Config, S3Store, Store},
    BeginUpload, DatasetError, UploadState,
};
use std::{path::PathBuf, process::Command, sync::Arc};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/juicefs.sh");

/// A JuiceFS volume, mounted and served over S3; stopped (by pidfile) and
/// unmounted when dropped, whatever the test did.
struct Juicefs {
    _dir: tempfile::TempDir,
    meta: PathBuf,
    mnt: PathBuf,
    port: u16,
}

fn script(args: &[&str]) {
    let out = Command::new("bash").arg(SCRIPT).args(args).output().expect("run scripts/juicefs.sh");
    assert!(
        out.status.success(),
        "scripts/juicefs.sh {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Juicefs {
    fn start() -> Juicefs {
        script(&["bin"]);
        let dir = tempfile::tempdir().unwrap();
        let meta = dir.path().join("volume");
        let mnt = dir.path().join("mnt");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let jfs = Juicefs { _dir: dir, meta, mnt, port };
        script(&["format", jfs.meta.to_str().unwrap()]);
        script(&["mount", jfs.meta.to_str().unwrap(), jfs.mnt.to_str().unwrap()]);
        script(&["gateway", jfs.meta.to_str().unwrap(), &port.to_string()]);
        jfs
    }

    fn s3(&self) -> S3Store {
        S3Store::connect(&S3Config {
            endpoint: format!("http://127.0.0.1:{}", self.port),
            bucket: "gantry".into(),
            access_key: "gantry-key".into(),
            secret_key: "gantry-secret-key".into(),
            region: "us-east-1".into(),
        })
        .unwrap()
    }
}

impl Drop for Juicefs {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(SCRIPT)
            .args(["stop", self.meta.to_str().unwrap(), self.mnt.to_str().unwrap()])
            .status();
    }
}

fn done(state: UploadState) -> datasets::FileView {
    match state {
        UploadState::Done(f) => f,
        other => panic!("expected a finished upload, got {other:?}"),
    }
}

gantry_testkit::timed_test! {
    limit = 300;
    async fn the_central_store_on_juicefs_as_a_mount_and_over_s3() {
        let jfs = Juicefs::start();

        // 1. The directory store on the FUSE mount.
        let on_mount = jfs.mnt.join("central");
        let env = env_with(Some(Arc::new(DirStore::new(&on_mount))), None).await;
        let data = random_bytes(9 * 1024 * 1024 + 3);
        let file = done(env.put("a/b.bin", &data).await.unwrap());
        assert_eq!(file.sha256, sha(&data));
        assert_eq!(sha(&std::fs::read(on_mount.join("coco/v1/images/a/b.bin")).unwrap()), sha(&data));
        let begin = BeginUpload { code: "coco", version: "v1", name: "cut.bin", replace: false, total: Some(data.len() as u64), resumable: false };
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let err = datasets::write_upload(&env.pool, &up, 0, cut_body(&data, 3_000_000), None).await.unwrap_err();
        assert!(matches!(err, DatasetError::Incomplete(_)), "{err:?}");
        assert_eq!(files_under(&on_mount), vec!["coco/v1/images/a/b.bin".to_string()]);
        drop(env);

        // 2. The S3 store through the gateway, over the same volume.
        let s3: Arc<dyn Store> = Arc::new(jfs.s3());
        let env = env_with(Some(s3.clone()), None).await;
        let file = done(env.put("x/y.bin", &data).await.unwrap());
        assert_eq!(file.sha256, sha(&data));
        let (size, stored) = gantry_platform::datasets::store::checksum(s3.as_ref(), "coco/v1/images/x/y.bin").await.unwrap();
        assert_eq!((size as usize, stored), (data.len(), sha(&data)));
        // Put over S3, seen in the FUSE mount: one volume.
        assert_eq!(sha(&std::fs::read(jfs.mnt.join("coco/v1/images/x/y.bin")).unwrap()), sha(&data));
        assert_eq!(sha(&std::fs::read(env.region_dir().join("coco/v1/images/x/y.bin")).unwrap()), sha(&data));

        // A cut one-request upload leaves no object, temporary or not.
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let err = datasets::write_upload(&env.pool, &up, 0, cut_body(&data, 6_000_000), None).await.unwrap_err();
        assert!(matches!(err, DatasetError::Incomplete(_)), "{err:?}");
        let keys: Vec<String> = s3.list("").await.unwrap().into_iter().map(|(k, _)| k).filter(|k| k.starts_with("coco/") || k.starts_with(".gantry-tmp")).collect();
        assert_eq!(keys, vec!["coco/v1/images/x/y.bin".to_string()]);

        // A resumable upload: a first request, then the rest from its offset.
        let resumable = BeginUpload { code: "coco", version: "v1", name: "r.bin", replace: false, total: Some(data.len() as u64), resumable: true };
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &resumable).await.unwrap();
        let half = 5 * 1024 * 1024;
        let state = datasets::write_upload(&env.pool, &up, 0, body(data[..half].to_vec(), 65536), None).await.unwrap();
        assert!(matches!(state, UploadState::Partial { offset, .. } if offset == half as u64), "{state:?}");
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &resumable).await.unwrap();
        assert_eq!(up.offset, half as u64);
        // Each later request writes its own piece: one whole, one cut short.
        let mib = 1 << 20;
        let state = datasets::write_upload(&env.pool, &up, half as u64, body(data[half..half + mib].to_vec(), 65536), None).await.unwrap();
        assert!(matches!(state, UploadState::Partial { offset, .. } if offset == (half + mib) as u64), "{state:?}");
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &resumable).await.unwrap();
        let err = datasets::write_upload(&env.pool, &up, (half + mib) as u64, cut_body(&data[half + mib..], 700_000), None).await.unwrap_err();
        assert!(matches!(err, DatasetError::Incomplete(_)), "{err:?}");
        // A restart meanwhile keeps the pieces of an upload in progress.
        datasets::clean_at_start(&env.pool, &env.stores).await.unwrap();
        let at = half + mib + 700_000;
        let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &resumable).await.unwrap();
        assert_eq!(up.offset, at as u64);
        let file = done(datasets::write_upload(&env.pool, &up, at as u64, body(data[at..].to_vec(), 65536), Some(&sha(&data))).await.unwrap());
        assert_eq!(file.sha256, sha(&data));
        assert_eq!(gantry_platform::datasets::store::checksum(s3.as_ref(), "coco/v1/images/r.bin").await.unwrap().1, sha(&data));
        assert_eq!(s3.list(".gantry-tmp").await.unwrap(), Vec::<(String, u64)>::new(), "pieces left after placing");

        // Cancelled, or left in progress when the version goes: no piece stays.
        for name in ["cancelled.bin", "left.bin"] {
            let begin = BeginUpload { name, ..resumable };
            let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
            datasets::write_upload(&env.pool, &up, 0, body(data[..mib].to_vec(), 65536), None).await.unwrap();
            let up = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
            datasets::write_upload(&env.pool, &up, mib as u64, body(data[mib..2 * mib].to_vec(), 65536), None).await.unwrap();
        }
        datasets::cancel_upload(&env.pool, &env.stores, &env.alice, "coco", "v1", "cancelled.bin").await.unwrap();
        assert_eq!(s3.list(".gantry-tmp").await.unwrap().len(), 2, "the upload left in progress: its object and one piece");

        // A ranged read, and deleting the version empties both stores.
        let mut part = s3.get("coco/v1/images/r.bin", Some((10, 19))).await.unwrap();
        let mut got = Vec::new();
        while let Some(chunk) = futures_util::StreamExt::next(&mut part).await {
            got.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(got, data[10..20].to_vec());
        // Names with characters object_store percent-encodes in a key (and
        // a non-ASCII one) are listed, read and removed like any other.
        for name in ["a[1].txt", "b%20{x}#~é.txt"] {
            done(env.put(name, name.as_bytes()).await.unwrap());
            let key = format!("coco/v1/images/{name}");
            assert!(s3.list("coco").await.unwrap().iter().any(|(k, size)| *k == key && *size == name.len() as u64), "{name} listed as put");
            assert_eq!(gantry_platform::datasets::store::checksum(s3.as_ref(), &key).await.unwrap().1, sha(name.as_bytes()));
        }
        datasets::delete_version(&env.pool, &env.stores, &env.alice, "coco", "v1").await.unwrap();
        assert_eq!(s3.list("coco").await.unwrap(), Vec::<(String, u64)>::new(), "left in the bucket");
        assert_eq!(s3.list(".gantry-tmp").await.unwrap(), Vec::<(String, u64)>::new(), "temporary objects left in the bucket");
        assert!(files_under(&env.region_dir()).is_empty());
    }
}
