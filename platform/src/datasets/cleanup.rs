//! What a server does with uploads at start: one-request uploads died with
//! the process that served them, resumable ones expire, and every
//! temporary object without a live upload goes. First, the files of
//! deleted versions still recorded are removed ([`super::purge`]), and a
//! replace that died while its copies moved into place is undone, so both
//! stores hold the listed file again. While the server runs,
//! [`super::sweep()`] does the part that is safe beside live uploads.

use super::{store::{self, Store}, DatasetError, Datasets};
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
    let regions: Vec<String> = sqlx::query_scalar("SELECT code FROM regions").fetch_all(pool).await?;
    let mut all: Vec<Arc<dyn Store>> = vec![stores.central()?];
    all.extend(regions.iter().filter_map(|r| stores.region_store(r).ok()));
    // The temporary objects first, the live uploads after: an upload
    // another server begins in between is in the second list whenever its
    // objects are in the first (its row is written before its objects).
    let mut found = Vec::with_capacity(all.len());
    for s in all {
        let temps = s.list(store::TEMP_DIR).await.map_err(|e| DatasetError::store("listing the temporary uploads of a store failed", format!("{}: {e}", s.describe())))?;
        found.push((s, temps));
    }
    let live: std::collections::HashSet<String> = sqlx::query_scalar("SELECT temp_key FROM dataset_uploads").fetch_all(pool).await?.into_iter().collect();
    let mut removed = 0;
    for (s, temps) in found {
        for (key, _) in temps {
            let name = key.rsplit('/').next().unwrap_or("");
            // `.next`: a resumed S3 upload's new object; `.old`: a replaced file kept aside.
            let upload = name.strip_suffix(".next").or_else(|| name.strip_suffix(".old")).unwrap_or(name);
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
/// file's copy aside. Those stores get the listed file back: the listing
/// was never changed, so it is what both stores must hold. `ended` picks
/// the uploads that are over (unqualified columns of `dataset_uploads`;
/// `?1`: the expiry, `?2`: now).
pub(super) async fn put_back_interrupted(pool: &Pool, stores: &Datasets, ended: &str, at: i64, expiry: i64) -> Result<usize, DatasetError> {
    let sql = format!(
        "SELECT u.temp_key, d.code, v.name, d.category, u.name, r.code FROM dataset_uploads u
           JOIN dataset_versions v ON v.id = u.version_id JOIN datasets d ON d.id = v.dataset_id JOIN regions r ON r.id = d.region_id
         WHERE u.replace = 1 AND {ended}"
    );
    let dead: Vec<(String, String, String, String, String, String)> = sqlx::query_as(&sql).bind(expiry).bind(at).fetch_all(pool).await?;
    let mut restored = 0;
    for (temp, code, version, category, name, region) in dead {
        let key = rules::storage_key(&code, &version, &category, &name);
        restored += put_back_one(stores, &temp, &key, &region).await?;
    }
    Ok(restored)
}

/// One ended replace upload `temp` of the file at `key`: the stores whose
/// temporary object is gone (moved into place) but whose copy of the listed
/// file is still aside get that copy back. The number of stores fixed.
pub(super) async fn put_back_one(stores: &Datasets, temp: &str, key: &str, region: &str) -> Result<usize, DatasetError> {
    let aside = format!("{temp}.old");
    let mut restored = 0;
    for s in [stores.central()?, stores.region_store(region)?] {
        let failed = |e: std::io::Error| DatasetError::store("putting back a file an interrupted replace had set aside failed", format!("{}: {e}", s.describe()));
        let moved = s.temp_len(temp).await.map_err(failed)?.is_none();
        if moved && s.temp_len(&aside).await.map_err(failed)?.is_some() {
            s.rename_into_place(&aside, key).await.map_err(failed)?;
            tracing::warn!(%key, store = %s.describe(), "an interrupted replace was undone: the listed file is back");
            restored += 1;
        }
    }
    Ok(restored)
}
