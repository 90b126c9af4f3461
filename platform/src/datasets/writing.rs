//! One request writes an upload at a time. A resumable upload can be
//! continued by any request of its owner — a client that retries while its
//! first request is still being received, two tabs, two servers behind one
//! address — and two writers in one temporary file would interleave their
//! bytes (and truncate each other's: resuming cuts the file to the offset).
//! The writer holds a lease on the upload's row, renewed while it writes;
//! a second request is refused (409) with what to do. A process that died
//! mid-write leaves its lease to expire: the upload can be continued
//! [`LEASE_SECS`] later at the latest. Every claim, renewal and release
//! also marks the upload as touched: a resumable upload expires after a
//! spell without activity (see [`super::sweep()`]), not at a fixed age.

use super::DatasetError;
use crate::{db::Pool, now};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long a lease holds without renewal.
pub const LEASE_SECS: i64 = 60;
/// How often a writer renews it: a few renewals may fail (a busy
/// database) before the lease could lapse under a live writer.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// This request's lease on an upload; released when dropped.
pub(super) struct Claim {
    pool: Pool,
    upload_id: i64,
    owner: String,
    renewal: JoinHandle<()>,
}

/// Takes the upload for this request, or says why not. The upload is
/// named by its id and its temporary object together: a request holding
/// an upload that has ended never takes another upload's row.
pub(super) async fn claim(pool: &Pool, upload_id: i64, temp: &str) -> Result<Claim, DatasetError> {
    let owner = super::store::hex(&rand::random::<[u8; 12]>());
    let at = now();
    let taken = sqlx::query(
        "UPDATE dataset_uploads SET writer = ?, writer_expires = ?, touched_at = ? WHERE id = ? AND temp_key = ? AND (writer IS NULL OR writer_expires <= ?)",
    )
    .bind(&owner)
    .bind(at + LEASE_SECS)
    .bind(at)
    .bind(upload_id)
    .bind(temp)
    .bind(at)
    .execute(pool)
    .await?
    .rows_affected();
    if taken == 0 {
        let exists: Option<i64> =
            sqlx::query_scalar("SELECT id FROM dataset_uploads WHERE id = ? AND temp_key = ?").bind(upload_id).bind(temp).fetch_optional(pool).await?;
        return Err(match exists {
            Some(_) => DatasetError::Busy(
                "another request is writing this upload now; when it has ended, ask for the offset the server holds and continue from there".into(),
            ),
            None => DatasetError::NotFound("the upload (it was cancelled, or it has ended)".into()),
        });
    }
    let renewal = tokio::spawn({
        let (pool, owner) = (pool.clone(), owner.clone());
        async move {
            loop {
                tokio::time::sleep(RENEW_EVERY).await;
                let at = now();
                let renewed = sqlx::query("UPDATE dataset_uploads SET writer_expires = ?, touched_at = ? WHERE id = ? AND writer = ?")
                    .bind(at + LEASE_SECS)
                    .bind(at)
                    .bind(upload_id)
                    .bind(&owner)
                    .execute(&pool)
                    .await;
                match renewed {
                    Ok(r) if r.rows_affected() == 0 => return, // placed or cancelled: nothing left to hold
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, upload = upload_id, "could not renew an upload's writer lease; retrying"),
                }
            }
        }
    });
    Ok(Claim { pool: pool.clone(), upload_id, owner, renewal })
}

impl Claim {
    /// Frees the upload for the next request before this one answers, so
    /// a client continuing at once is not refused.
    pub(super) async fn release(mut self) {
        self.renewal.abort();
        let owner = std::mem::take(&mut self.owner);
        release(&self.pool, self.upload_id, &owner).await;
    }
}

impl Drop for Claim {
    /// A claim dropped unreleased (a panic, a cancelled future) stops its
    /// renewal and is released in the background; without a runtime the
    /// lease simply expires.
    fn drop(&mut self) {
        self.renewal.abort();
        if self.owner.is_empty() {
            return;
        }
        let (pool, id, owner) = (self.pool.clone(), self.upload_id, std::mem::take(&mut self.owner));
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { release(&pool, id, &owner).await });
        }
    }
}

async fn release(pool: &Pool, upload_id: i64, owner: &str) {
    let released = sqlx::query("UPDATE dataset_uploads SET writer = NULL, writer_expires = 0, touched_at = ? WHERE id = ? AND writer = ?")
        .bind(now())
        .bind(upload_id)
        .bind(owner)
        .execute(pool)
        .await;
    if let Err(e) = released {
        tracing::warn!(error = %e, upload = upload_id, "could not release an upload's writer lease; it expires by itself");
    }
}
