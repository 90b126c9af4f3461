//! What a server does with uploads at start: one-request uploads died with
//! the process that served them, resumable ones expire, and every
//! temporary object without a live upload goes. First, the files of
//! deleted versions still recorded are removed ([`super::purge`]), and a
//! replace that died while its copies moved into place is undone, so both
//! stores hold the listed file again. While the server runs,
//! [`super::sweep()`] does the part that is safe beside live uploads.

use super::{
    listing,
    store::{self, Store},
    writing, DatasetError, Datasets,
};
use crate::{db::Pool, now};
use gantry_core::datasets as rules;
use std::sync::Arc;

/// At start: one-request uploads died with the process that served them,
/// resumable ones expire; every temporary object without a live upload goes.
/// An upload whose writer's lease is still held is left alone: another
/// server sharing the database may be receiving it right now (one that
/// died lets its lease lapse; [`super::writing::LEASE_SECS`] after start the
/// server looks again).
pub async fn clean_at_start(pool: &Pool, stores: &Datasets) -> Result<usize, DatasetError> {
    // Before the server takes requests, every one-request upload is a dead
    // process's (or another live server's, whose writer holds its lease).
    clean_after_start(pool, stores, i64::MAX).await
}

/// The clean of a server that started at `started` (unix seconds): a
/// one-request upload last touched since then may be one of its own whose
/// row is written and whose writer has not yet taken it — not a dead
/// process's — and is left alone.
pub async fn clean_after_start(pool: &Pool, stores: &Datasets, started: i64) -> Result<usize, DatasetError> {
    let at = now();
    let expiry = at - stores.limits().resumable_expiry_secs;
    super::purge::retry_pending(pool, stores, at).await?;
    let ended = ended_at_start(started);
    put_back_interrupted(pool, stores, &ended, at, expiry).await?;
    sqlx::query(&format!("DELETE FROM dataset_uploads WHERE {ended}")).bind(expiry).bind(at).execute(pool).await?;
    // Those uploads' files are back as listed: downloads may read them again.
    listing::clear_stale_placing(pool).await?;
    put_back_resumable(pool, stores).await?;
    let regions: Vec<String> = sqlx::query_scalar("SELECT code FROM regions").fetch_all(pool).await?;
    let mut all: Vec<Arc<dyn Store>> = vec![stores.central()?];
    all.extend(regions.iter().filter_map(|r| stores.region_store(r).ok()));
    // The temporary objects first, the live uploads after: an upload
    // another server begins in between is in the second list whenever its
    // objects are in the first (its row is written before its objects).
    let mut found = Vec::with_capacity(all.len());
    for s in all {
        let temps = s.list(store::TEMP_DIR).await.map_err(|e| {
            DatasetError::store("listing the temporary uploads of a store failed", format!("{}: {e}", s.describe()))
        })?;
        found.push((s, temps));
    }
    let live: std::collections::HashSet<String> =
        sqlx::query_scalar("SELECT temp_key FROM dataset_uploads").fetch_all(pool).await?.into_iter().collect();
    let mut removed = 0;
    for (s, temps) in found {
        for (key, _) in temps {
            let name = key.rsplit('/').next().unwrap_or("");
            // `.next`: a resumed S3 upload's new object (before pieces); `.old`: a replaced
            // file kept aside; `.part-{offset}`: a later request's piece of an S3 upload.
            let upload = name
                .strip_suffix(".next")
                .or_else(|| name.strip_suffix(".old"))
                .or_else(|| name.split_once(".part-").map(|(u, _)| u))
                .unwrap_or(name);
            if !live.contains(upload) && s.delete(&key).await.is_ok() {
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// The uploads a server that started at `started` ends (`?1`: the
/// expiry, `?2`: now): every resumable one idle past the expiry, and every
/// one-request upload but those begun since `started` that no writer has
/// taken yet (this server's own, about to be) — always unless a writer's
/// lease is held. (`started` is an integer: formatted, not bound.)
fn ended_at_start(started: i64) -> String {
    // Once requests are being served (a finite `started`), resumable
    // uploads are the sweep's: it takes their lease before touching them,
    // and a client may be resuming one right now.
    let resumable = if started == i64::MAX { "OR touched_at < ?1" } else { "AND ?1 = ?1" };
    format!("((resumable = 0 AND (writer IS NOT NULL OR touched_at < {started})) {resumable}) AND (writer IS NULL OR writer_expires <= ?2)")
}

/// A replace that died between moving its copies into place and listing
/// them (a crash, or a panic in its task) left the new file at the key of
/// some stores — those whose temporary object is gone — with the listed
/// file's copy aside. Every store gets the listed file back: the listing
/// was never changed, so it is what both stores must hold. `ended` picks
/// the uploads that are over (unqualified columns of `dataset_uploads`;
/// `?1`: the expiry, `?2`: now).
pub(super) async fn put_back_interrupted(
    pool: &Pool,
    stores: &Datasets,
    ended: &str,
    at: i64,
    expiry: i64,
) -> Result<usize, DatasetError> {
    let sql = format!(
        "SELECT u.temp_key, d.code, v.name, d.category, u.name, r.code FROM dataset_uploads u
           JOIN dataset_versions v ON v.id = u.version_id JOIN datasets d ON d.id = v.dataset_id JOIN regions r ON r.id = d.region_id
         WHERE u.replace = 1 AND {ended}"
    );
    let dead: Vec<(String, String, String, String, String, String)> =
        sqlx::query_as(&sql).bind(expiry).bind(at).fetch_all(pool).await?;
    let mut restored = 0;
    for (temp, code, version, category, name, region) in dead {
        let key = rules::storage_key(&code, &version, &category, &name);
        restored += put_back_one(stores, &temp, &key, &region).await?;
    }
    Ok(restored)
}

/// One ended replace upload `temp` of the file at `key`: every store that
/// still holds the listed file's copy aside gets it back at the key (see
/// [`put_back_in`]). The number of stores where the new file had moved in.
pub(super) async fn put_back_one(
    stores: &Datasets,
    temp: &str,
    key: &str,
    region: &str,
) -> Result<usize, DatasetError> {
    put_back_in(&[stores.central()?, stores.region_store(region)?], temp, key).await
}

/// [`put_back_one`] in the upload's two stores (central first). Call it
/// only while nobody places the upload: its writer's lease held, or the
/// upload ended. A store whose temporary object is gone gets the copy kept
/// aside back at the key. One whose temporary object is still there never
/// had the new file moved in — in a directory, where a move is one
/// rename — and only loses the name aside; an object store's move is a
/// copy then a delete, so a crash between them leaves the new file at the
/// key beside a temporary object that looks unmoved: it gets the copy back
/// either way.
pub(super) async fn put_back_in(both: &[Arc<dyn Store>; 2], temp: &str, key: &str) -> Result<usize, DatasetError> {
    let aside = format!("{temp}.old");
    let mut restored = 0;
    for s in both {
        let failed = |e: std::io::Error| {
            DatasetError::store(
                "putting back a file an interrupted replace had set aside failed",
                format!("{}: {e}", s.describe()),
            )
        };
        if s.temp_len(&aside).await.map_err(failed)?.is_none() {
            continue;
        }
        let moved = s.temp_len(temp).await.map_err(failed)?.is_none();
        if moved || s.local_dir().is_none() {
            s.rename_into_place(&aside, key).await.map_err(failed)?;
        }
        s.delete(&store::temp_key(&aside)).await.map_err(failed)?;
        if moved {
            tracing::warn!(%key, store = %s.describe(), "an interrupted replace was undone: the listed file is back");
            restored += 1;
        }
    }
    Ok(restored)
}

/// Whether replace upload `temp` has a copy of the listed file aside in
/// `s`: its placing began and never ended.
async fn kept_aside(s: &Arc<dyn Store>, temp: &str) -> Result<bool, DatasetError> {
    let aside = s.temp_len(&format!("{temp}.old")).await;
    Ok(aside
        .map_err(|e| {
            DatasetError::store(
                "asking a store for a file an interrupted replace had set aside failed",
                format!("{}: {e}", s.describe()),
            )
        })?
        .is_some())
}

/// Resumable replace uploads that are not over but whose placing stopped
/// between its moves (their process died, or their placing task): the
/// listed file goes back into every store now, not when the upload
/// expires a week later — meanwhile the file, marked placing, is refused
/// to downloads. The upload stays, to be resumed from what both stores hold.
/// Each is taken under its writer's lease (without touching it: this is
/// not the client's activity), so a client resuming it now is refused
/// (409, and retries) rather than having its file moved under it; one
/// whose lease is held is being placed or written, and left alone.
pub(super) async fn put_back_resumable(pool: &Pool, stores: &Datasets) -> Result<usize, DatasetError> {
    type Row = (i64, String, String, String, String, String, String, bool);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT u.id, u.temp_key, d.code, v.name, d.category, u.name, r.code, COALESCE(f.placing, 0) FROM dataset_uploads u
           JOIN dataset_versions v ON v.id = u.version_id JOIN datasets d ON d.id = v.dataset_id JOIN regions r ON r.id = d.region_id
           LEFT JOIN dataset_files f ON f.version_id = u.version_id AND f.name = u.name
         WHERE u.replace = 1 AND u.resumable = 1 AND (u.writer IS NULL OR u.writer_expires <= ?) ORDER BY u.id",
    )
    .bind(now())
    .fetch_all(pool)
    .await?;
    let mut restored = 0;
    for (id, temp, code, version, category, name, region, placing) in rows {
        let both = [stores.central()?, stores.region_store(&region)?];
        // Looked at first without the lease: a healthy upload (nearly all)
        // is never taken from its client. One marked placing (downloads of
        // the listed file wait) is taken even with nothing aside: its
        // placing may have died before it set anything aside.
        let mut any = placing;
        for s in &both {
            any |= kept_aside(s, &temp).await?;
        }
        if !any {
            continue;
        }
        let owner = format!("put-back-{}", store::hex(&rand::random::<[u8; 8]>()));
        let at = now();
        let taken = sqlx::query("UPDATE dataset_uploads SET writer = ?, writer_expires = ? WHERE id = ? AND temp_key = ? AND (writer IS NULL OR writer_expires <= ?)")
            .bind(&owner)
            .bind(at + writing::LEASE_SECS)
            .bind(id)
            .bind(&temp)
            .bind(at)
            .execute(pool)
            .await?;
        if taken.rows_affected() == 0 {
            continue;
        }
        let key = rules::storage_key(&code, &version, &category, &name);
        let put_back = match put_back_in(&both, &temp, &key).await {
            Ok(n) => listing::placed_back(pool, id, &temp).await.map(|_| n),
            Err(e) => Err(e),
        };
        sqlx::query("UPDATE dataset_uploads SET writer = NULL, writer_expires = 0 WHERE id = ? AND writer = ?")
            .bind(id)
            .bind(&owner)
            .execute(pool)
            .await?;
        restored += put_back?;
    }
    Ok(restored)
}
