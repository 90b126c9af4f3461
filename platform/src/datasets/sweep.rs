//! While the server runs, every [`SWEEP_EVERY`]: resumable uploads nobody
//! has touched for `Limits::resumable_expiry_secs` expire — their
//! reservation against the quota, their row (which blocks sealing) and
//! their temporary objects in both stores go — and the files of deleted
//! versions that a failed or interrupted removal left are removed
//! ([`super::purge`]). Without it an upload abandoned in a closed tab
//! would hold all of that until the next restart. A resumable replace
//! whose placing died between its moves gets the listed file put back
//! ([`super::cleanup`]), though it has not expired.
//!
//! A one-request upload is ended only if no writer ever took it for a
//! lease period (its request was cut off between writing the row and
//! taking the upload); one whose writer's lease lapsed is the start-up
//! clean's. Unlike that clean the sweep never touches a temporary object
//! of an upload that still has a row.

use super::{cleanup, store, DatasetError, Datasets};
use crate::{audit, db::Pool, now};
use gantry_core::datasets as rules;
use std::time::Duration;

/// How often a running server sweeps.
pub const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// Uploads a sweep ends (`?1`: the expiry, `?2`: now): resumable ones idle
/// past the expiry and one-request ones no writer took for a writer's
/// lease period — never one whose writer holds the lease. A one-request
/// upload whose writer's lease lapsed is left to the start-up clean: that
/// writer may be alive, only unable to renew. (The lease period is a
/// constant: formatted, not bound.)
fn idle() -> String {
    format!(
        "(CASE WHEN resumable = 1 THEN touched_at < ?1 ELSE writer IS NULL AND touched_at < ?2 - {} END) AND (writer IS NULL OR writer_expires <= ?2)",
        super::writing::LEASE_SECS
    )
}

/// Removes the sweep's own upload `?3` (taken as writer `?4`) if nobody
/// asked for it since (`?1`, `?2` as in [`idle`]).
fn still_idle() -> String {
    format!(
        "DELETE FROM dataset_uploads WHERE id = ?3 AND writer = ?4 AND (CASE WHEN resumable = 1 THEN touched_at < ?1 ELSE touched_at < ?2 - {} END)",
        super::writing::LEASE_SECS
    )
}

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Uploads expired (resumable ones idle past the expiry, one-request
    /// ones that no writer took).
    pub expired: usize,
    /// Deleted versions whose files are now gone from both stores.
    pub purged: usize,
}

/// One sweep as at `at` (unix seconds; the caller's clock, so tests need
/// not wait a week). Each expiry is audited as `dataset.upload.expire`.
pub async fn sweep(pool: &Pool, stores: &Datasets, at: i64) -> Result<Swept, DatasetError> {
    let purged = super::purge::retry_pending(pool, stores, at).await?;
    let expiry = at - stores.limits().resumable_expiry_secs;
    let sql = format!(
        "SELECT u.id, u.temp_key, u.name, d.code, v.name, d.category, r.code, u.touched_at, u.replace FROM dataset_uploads u
           JOIN dataset_versions v ON v.id = u.version_id JOIN datasets d ON d.id = v.dataset_id JOIN regions r ON r.id = d.region_id
         WHERE {} ORDER BY u.id",
        idle()
    );
    type Row = (i64, String, String, String, String, String, String, i64, bool);
    let candidates: Vec<Row> = sqlx::query_as(&sql).bind(expiry).bind(at).fetch_all(pool).await?;
    let mut expired = 0;
    for (id, temp, name, code, version, category, region, touched, replace) in candidates {
        // Taken the way a writer takes it, and only while still idle: a
        // client coming back now is refused (409, and it retries) instead
        // of having its file moved or its row removed under it.
        let sweeper = format!("sweep-{}", store::hex(&rand::random::<[u8; 8]>()));
        let taken = sqlx::query(&format!(
            "UPDATE dataset_uploads SET writer = ?3, writer_expires = ?4 WHERE id = ?5 AND temp_key = ?6 AND {}",
            idle()
        ))
        .bind(expiry)
        .bind(at)
        .bind(&sweeper)
        .bind(now() + super::writing::LEASE_SECS)
        .bind(id)
        .bind(&temp)
        .execute(pool)
        .await?;
        if taken.rows_affected() == 0 {
            continue;
        }
        // A replace whose process died while moving its copies into place
        // gets the listed file back before its objects go.
        if replace {
            let key = rules::storage_key(&code, &version, &category, &name);
            if let Err(e) = cleanup::put_back_one(stores, &temp, &key, &region).await {
                sqlx::query("UPDATE dataset_uploads SET writer = NULL, writer_expires = 0 WHERE id = ? AND writer = ?")
                    .bind(id)
                    .bind(&sweeper)
                    .execute(pool)
                    .await?;
                return Err(e);
            }
        }
        // Removed only if nobody asked for it since it was taken (asking
        // does not need the lease): that client keeps its upload.
        let mut tx = crate::db::begin_immediate(pool).await?;
        let gone = sqlx::query(&still_idle()).bind(expiry).bind(at).bind(id).bind(&sweeper).execute(&mut *tx).await;
        if !matches!(gone, Ok(ref g) if g.rows_affected() == 1) {
            drop(tx);
            sqlx::query("UPDATE dataset_uploads SET writer = NULL, writer_expires = 0 WHERE id = ? AND writer = ?")
                .bind(id)
                .bind(&sweeper)
                .execute(pool)
                .await?;
            gone?;
            continue;
        }
        let idle_h = (at - touched).max(0) / 3600;
        let idle_for = if idle_h > 0 { format!("{idle_h} h") } else { "a lease period".into() };
        let detail =
            format!("unfinished upload of {name} into {code}/{version} expired after {idle_for} without activity");
        audit::record(&mut *tx, None, "dataset.upload.expire", &detail).await?;
        tx.commit().await?;
        tracing::info!(upload = id, "{detail}");
        remove_temps(stores, &region, &temp).await;
        expired += 1;
    }
    // After the expiries, which may have put back some themselves: a
    // resumable replace whose placing died on a server that never came
    // back would otherwise leave its file refused to downloads (marked
    // placing) until it expires.
    if let Err(e) = cleanup::put_back_resumable(pool, stores).await {
        tracing::warn!(error = %e, "could not put back a file an interrupted resumable replace had set aside; tried again at the next sweep");
    }
    // The files of the replaces that expired above are back as listed.
    if let Err(e) = super::listing::clear_stale_placing(pool).await {
        tracing::warn!(error = %e, "could not let downloads read files whose replace ended; tried again at the next sweep");
    }
    Ok(Swept { expired, purged })
}

/// An expired upload's objects in both stores: the upload itself, a
/// resumed S3 upload's next object, a replaced file's copy kept aside.
/// One that cannot be removed now has no row: the next start removes it.
async fn remove_temps(stores: &Datasets, region: &str, temp: &str) {
    let both = [stores.central(), stores.region_store(region)];
    for s in both.into_iter().flatten() {
        for key in [temp.to_string(), format!("{temp}.next"), format!("{temp}.old")] {
            if let Err(e) = s.delete(&store::temp_key(&key)).await {
                tracing::warn!(error = %e, store = %s.describe(), %key, "could not remove an expired upload's temporary object; the next start removes it");
            }
        }
    }
}
