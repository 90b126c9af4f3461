//! Abandoned resumable uploads expire while the server runs: the periodic
//! sweep ends a resumable upload nobody has touched for the expiry — its
//! row, its reservation against the quota and its temporary objects in
//! both stores — so the version can be sealed; it keeps one touched
//! lately (however old), one whose writer's lease is held, and a
//! one-request upload begun moments ago (its row is written before its
//! writer takes it) or one whose writer's lease lapsed (that writer may be
//! alive) — but not one no writer took for a lease period;
//! a client coming back while the sweep ends its upload is refused, not
//! cut under. Time is the sweep's argument: nothing here waits.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::{
    datasets::{self, quotas, BeginUpload, Swept},
    now,
};
use std::sync::Arc;

/// Begins a resumable upload of `data.len()` bytes into `version` and
/// sends its first `sent` bytes before the connection breaks.
async fn abandoned(env: &Env, version: &str, name: &str, data: &[u8], sent: usize) -> datasets::Upload {
    let begin =
        BeginUpload { code: "coco", version, name, replace: false, total: Some(data.len() as u64), resumable: true };
    let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
    let cut = datasets::write_upload(&env.pool, &upload, 0, cut_body(data, sent), None).await.unwrap_err();
    assert_eq!(cut.status(), 400, "a cut body: {cut}");
    upload
}

async fn reserved(env: &Env) -> u64 {
    let groups = quotas::overview(&env.pool, env.stores.limits().default_quota_bytes).await.unwrap();
    groups.iter().find(|g| g.group == "ml").unwrap().reserved_bytes
}

fn temps(env: &Env) -> Vec<Vec<String>> {
    [env.central_root.clone(), env.region_dir()].iter().map(|root| files_under(&root.join(".gantry-tmp"))).collect()
}

gantry_testkit::timed_test! {
    async fn the_sweep_expires_idle_resumable_uploads_and_nothing_else() {
        let env = env().await;
        datasets::create_version(&env.pool, &env.alice, "coco", "v2").await.unwrap();
        let data = random_bytes(300_000);
        // A tab closed mid-upload: v2 cannot be sealed while it is there.
        let idle = abandoned(&env, "v2", "idle.bin", &data, 100_000).await;
        let refused = datasets::seal_version(&env.pool, &env.alice, "coco", "v2").await.unwrap_err();
        assert!(refused.to_string().contains("1 upload(s) in progress"), "{refused}");
        // Begun long ago, continued a minute before the sweep.
        let recent = abandoned(&env, "v1", "recent.bin", &data, 100_000).await;
        // Idle too, but a writer (another server) holds its lease.
        let leased = abandoned(&env, "v1", "leased.bin", &data, 100_000).await;
        // A one-request upload whose row is written and not yet claimed,
        // and one whose request was cut off right there, long ago.
        let one = BeginUpload { code: "coco", version: "v1", name: "one.bin", replace: false, total: Some(5_000), resumable: false };
        datasets::begin_upload(&env.pool, &env.stores, &env.alice, &one).await.unwrap();
        let cut = BeginUpload { name: "cut.bin", ..one };
        datasets::begin_upload(&env.pool, &env.stores, &env.alice, &cut).await.unwrap();
        // And one whose writer could not renew its lease: it may be alive
        // (the start-up clean's to end, not the sweep's).
        let stalled = BeginUpload { name: "stalled.bin", ..one };
        datasets::begin_upload(&env.pool, &env.stores, &env.alice, &stalled).await.unwrap();
        sqlx::query("UPDATE dataset_uploads SET writer = 'stalled-writer', writer_expires = 1 WHERE name = 'stalled.bin'").execute(&env.pool).await.unwrap();
        assert_eq!(reserved(&env).await, 3 * 300_000 + 3 * 5_000);

        // Two hours on; the expiry here is one hour.
        let at = now() + 2 * 3600;
        sqlx::query("UPDATE dataset_uploads SET created_at = 0, touched_at = ? WHERE name = 'recent.bin'").bind(at - 60).execute(&env.pool).await.unwrap();
        sqlx::query("UPDATE dataset_uploads SET touched_at = ? WHERE name = 'one.bin'").bind(at - 5).execute(&env.pool).await.unwrap();
        sqlx::query("UPDATE dataset_uploads SET writer = 'another-server', writer_expires = ? WHERE name = 'leased.bin'")
            .bind(at + 30)
            .execute(&env.pool)
            .await
            .unwrap();
        let swept = datasets::sweep(&env.pool, &env.stores, at).await.unwrap();
        assert_eq!(swept, Swept { expired: 2, purged: 0 });

        let names: Vec<String> = sqlx::query_scalar("SELECT name FROM dataset_uploads ORDER BY name").fetch_all(&env.pool).await.unwrap();
        assert_eq!(names, ["leased.bin", "one.bin", "recent.bin", "stalled.bin"]);
        assert_eq!(reserved(&env).await, 2 * 300_000 + 2 * 5_000, "the idle and the cut uploads' reservations are freed");
        let mut kept = vec![recent.temp.clone(), leased.temp.clone()];
        kept.sort();
        assert_eq!(temps(&env), vec![kept.clone(), kept], "the idle upload's objects are gone from both stores, the others' stay");
        assert!(!temps(&env).concat().contains(&idle.temp));
        assert_eq!(env.count("SELECT COUNT(*) FROM audit_log WHERE action = 'dataset.upload.expire' AND detail LIKE '%idle.bin%'").await, 1);
        datasets::seal_version(&env.pool, &env.alice, "coco", "v2").await.unwrap();

        // The upload continued a minute ago goes on from where it stopped.
        let (held, _) = datasets::upload_status(&env.pool, &env.stores, &env.alice, "coco", "v1", "recent.bin").await.unwrap();
        assert_eq!(held, 100_000);
    }
}

gantry_testkit::timed_test! {
    async fn writing_to_an_upload_counts_as_activity() {
        let env = env().await;
        let data = random_bytes(200_000);
        let upload = abandoned(&env, "v1", "big.bin", &data, 50_000).await;
        // Begun long ago and left: the next sweep would end it.
        sqlx::query("UPDATE dataset_uploads SET created_at = 0, touched_at = 0").execute(&env.pool).await.unwrap();
        // The client comes back: asking for the upload and sending a piece.
        let begin = BeginUpload { code: "coco", version: "v1", name: "big.bin", replace: false, total: Some(200_000), resumable: true };
        let resumed = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert_eq!((resumed.id, resumed.offset), (upload.id, 50_000));
        assert!(env.count("SELECT touched_at FROM dataset_uploads").await >= now() - 60, "asking for the upload touched it");
        sqlx::query("UPDATE dataset_uploads SET touched_at = 0").execute(&env.pool).await.unwrap();
        let more = datasets::write_upload(&env.pool, &resumed, 50_000, cut_body(&data[50_000..], 50_000), None).await;
        assert!(more.is_err(), "cut again");
        let touched: i64 = env.count("SELECT touched_at FROM dataset_uploads").await;
        assert!(touched >= now() - 60, "writing touched the upload (touched_at {touched})");
        assert_eq!(datasets::sweep(&env.pool, &env.stores, now() + 600).await.unwrap(), Swept::default());
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 1);
    }
}

/// The env on a region store whose `temp_len` (the sweep looking at the
/// region's copy) a test can gate ("gated test store").
async fn with_gated_region(root: &std::path::Path) -> (Arc<Hooked>, Arc<Env>) {
    let region = Arc::new(Hooked::new("gated test store", root));
    (region.clone(), Arc::new(env_with(None, Some(region)).await))
}

gantry_testkit::timed_test! {
    async fn a_client_coming_back_while_the_sweep_ends_its_upload_is_refused_and_the_listed_file_stays() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let (region, env) = with_gated_region(&root).await;
        let old = b"the listed file".to_vec();
        assert!(matches!(env.put("a.txt", &old).await.unwrap(), datasets::UploadState::Done(_)));
        // A resumable replace of it, cut, then left for hours.
        let data = random_bytes(100_000);
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(100_000), resumable: true };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert!(datasets::write_upload(&env.pool, &upload, 0, cut_body(&data, 40_000), None).await.is_err());
        // What the client will send on coming back (asked for now: asking is activity).
        let resumed = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        let held = resumed.offset as usize;
        assert_eq!(held, 40_000);
        sqlx::query("UPDATE dataset_uploads SET touched_at = 0").execute(&env.pool).await.unwrap();

        // The sweep is ending it (looking at the region's copy) when the client comes back.
        let Gate { entered: at_region, go, .. } = region.on_temp_len.gate_once();
        let sweep = tokio::spawn({
            let env = env.clone();
            async move { datasets::sweep(&env.pool, &env.stores, now() + 2 * 3600).await }
        });
        at_region.await.unwrap();
        let refused = datasets::write_upload(&env.pool, &resumed, held as u64, body(data[held..].to_vec(), 20_000), None).await.unwrap_err();
        assert_eq!(refused.status(), 409, "the sweep holds the upload: {refused}");
        let _ = go.send(());
        assert_eq!(sweep.await.unwrap().unwrap(), Swept { expired: 1, purged: 0 });

        // The listed file is untouched, in both stores.
        let (_, listed) = datasets::file(&env.pool, &env.alice, "coco", "v1", "a.txt").await.unwrap();
        assert_eq!(listed.sha256, sha(&old));
        for root in [env.central_root.clone(), root.clone()] {
            assert_eq!(std::fs::read(root.join("coco/v1/images/a.txt")).unwrap(), old, "in {}", root.display());
        }
        assert_eq!(env.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn a_client_asking_for_its_upload_while_the_sweep_holds_it_keeps_it() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().to_path_buf();
        let (region, env) = with_gated_region(&root).await;
        assert!(matches!(env.put("a.txt", b"the listed file").await.unwrap(), datasets::UploadState::Done(_)));
        let data = random_bytes(100_000);
        let begin = BeginUpload { code: "coco", version: "v1", name: "a.txt", replace: true, total: Some(100_000), resumable: true };
        let upload = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert!(datasets::write_upload(&env.pool, &upload, 0, cut_body(&data, 40_000), None).await.is_err());
        sqlx::query("UPDATE dataset_uploads SET touched_at = 0").execute(&env.pool).await.unwrap();

        let Gate { entered: at_region, go, .. } = region.on_temp_len.gate_once();
        let sweep = tokio::spawn({
            let env = env.clone();
            // Now: the client's asking must count (left long ago: touched at 0).
            async move { datasets::sweep(&env.pool, &env.stores, now()).await }
        });
        at_region.await.unwrap();
        // The client comes back: asks for its upload (activity), is told
        // to wait while it sends.
        let resumed = datasets::begin_upload(&env.pool, &env.stores, &env.alice, &begin).await.unwrap();
        assert_eq!(resumed.offset, 40_000);
        let refused = datasets::write_upload(&env.pool, &resumed, 40_000, body(data[40_000..].to_vec(), 20_000), None).await.unwrap_err();
        assert_eq!(refused.status(), 409, "{refused}");
        let _ = go.send(());
        assert_eq!(sweep.await.unwrap().unwrap(), Swept::default(), "asked for meanwhile: kept");

        // Its retry goes on from where it stopped and ends whole.
        let done = datasets::write_upload(&env.pool, &resumed, 40_000, body(data[40_000..].to_vec(), 20_000), None).await.unwrap();
        let datasets::UploadState::Done(file) = done else { panic!("not done: {done:?}") };
        assert_eq!(file.sha256, sha(&data));
    }
}
