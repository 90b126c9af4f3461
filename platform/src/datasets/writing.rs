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
//!
//! The renewal is also how a writer learns, while its body still comes,
//! that it should stop: its upload ended under it (the version deleted,
//! and with it the upload's row and temporary objects), or the right the
//! request came with ([`Access`]) ended. It is told through
//! [`Claim::halted`] at the next renewal, instead of receiving the rest of
//! a body nobody will keep.

use super::{access::Access, DatasetError};
use crate::{db::Pool, now};
use std::time::Duration;
use tokio::{sync::watch, task::JoinHandle};

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
    halt: watch::Receiver<Option<Halt>>,
}

/// Why a writer must stop before its body has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Halt {
    /// The upload's version was deleted; its row and temporary objects went with it.
    VersionDeleted,
    /// The upload's row is gone, its version is not: it was cancelled, or it expired.
    UploadEnded,
    /// The right the request came with has ended.
    AccessEnded,
}

/// What the renewal of a writing request's lease looks at besides it.
pub(super) struct Watch {
    pub version_id: i64,
    pub access: Access,
}

/// Takes the upload for this request, or says why not. The upload is
/// named by its id and its temporary object together: a request holding
/// an upload that has ended never takes another upload's row.
pub(super) async fn claim(pool: &Pool, upload_id: i64, temp: &str) -> Result<Claim, DatasetError> {
    take(pool, upload_id, temp, None).await
}

/// [`claim`] for a request that writes a body into the upload: its
/// renewal also tells it ([`Claim::halted`]) when to stop.
pub(super) async fn claim_to_write(
    pool: &Pool,
    upload_id: i64,
    temp: &str,
    watch: Watch,
) -> Result<Claim, DatasetError> {
    take(pool, upload_id, temp, Some(watch)).await
}

async fn take(pool: &Pool, upload_id: i64, temp: &str, watch: Option<Watch>) -> Result<Claim, DatasetError> {
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
        let exists: Option<i64> = sqlx::query_scalar("SELECT id FROM dataset_uploads WHERE id = ? AND temp_key = ?")
            .bind(upload_id)
            .bind(temp)
            .fetch_optional(pool)
            .await?;
        return Err(match exists {
            Some(_) => DatasetError::Busy(
                "another request is writing this upload now; when it has ended, ask for the offset the server holds and continue from there".into(),
            ),
            None => DatasetError::NotFound("the upload (it was cancelled, or it has ended)".into()),
        });
    }
    let (tell, halt) = watch::channel(None);
    let renewal = tokio::spawn(renew(pool.clone(), upload_id, owner.clone(), watch, tell));
    Ok(Claim { pool: pool.clone(), upload_id, owner, renewal, halt })
}

/// Renews the lease while the request holds it; tells the writer to stop
/// once, when its upload or its right has ended. The lease is renewed
/// after that all the same, until the writer lets go: a body that had
/// ended is being placed, which runs to its end.
async fn renew(
    pool: Pool,
    upload_id: i64,
    owner: String,
    mut watching: Option<Watch>,
    tell: watch::Sender<Option<Halt>>,
) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let at = now();
        let renewed =
            sqlx::query("UPDATE dataset_uploads SET writer_expires = ?, touched_at = ? WHERE id = ? AND writer = ?")
                .bind(at + LEASE_SECS)
                .bind(at)
                .bind(upload_id)
                .bind(&owner)
                .execute(&pool)
                .await;
        match renewed {
            // Placed, cancelled or deleted: nothing left to hold.
            Ok(r) if r.rows_affected() == 0 => {
                if let Some(w) = watching {
                    let _ = tell.send(Some(gone(&pool, w.version_id).await));
                }
                return;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, upload = upload_id, "could not renew an upload's writer lease; retrying")
            }
        }
        let Some(w) = &watching else { continue };
        match w.access.holds(&pool).await {
            Ok(true) => {}
            Ok(false) => {
                let _ = tell.send(Some(Halt::AccessEnded));
                watching = None;
            }
            Err(e) => {
                tracing::warn!(error = %e, upload = upload_id, "could not look at an uploader's access; looking again at the next renewal")
            }
        }
    }
}

/// Why an upload's row is gone under its writer.
async fn gone(pool: &Pool, version_id: i64) -> Halt {
    let version: Result<Option<i64>, _> =
        sqlx::query_scalar("SELECT id FROM dataset_versions WHERE id = ?").bind(version_id).fetch_optional(pool).await;
    if matches!(version, Ok(None)) {
        Halt::VersionDeleted
    } else {
        Halt::UploadEnded
    }
}

impl Claim {
    /// Where the renewal says why the writer must stop (`None` until then).
    pub(super) fn halted(&self) -> watch::Receiver<Option<Halt>> {
        self.halt.clone()
    }

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
    let released = sqlx::query(
        "UPDATE dataset_uploads SET writer = NULL, writer_expires = 0, touched_at = ? WHERE id = ? AND writer = ?",
    )
    .bind(now())
    .bind(upload_id)
    .bind(owner)
    .execute(pool)
    .await;
    if let Err(e) = released {
        tracing::warn!(error = %e, upload = upload_id, "could not release an upload's writer lease; it expires by itself");
    }
}
