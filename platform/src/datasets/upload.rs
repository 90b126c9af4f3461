//! Uploads: a reservation row, then the body streamed into a temporary
//! object in both stores at once ([`super::pipeline`]: hashed on the way,
//! memory bounded by a few batches), then [`super::placing`] verifies both copies and
//! moves them into place. A one-request upload that does not finish
//! leaves nothing; a resumable one keeps its temporary objects (invisible)
//! until it is resumed, cancelled or expires.

use super::{catalog, pipeline, placing::{self, Streamed}, store::{self, Store}, writing, DatasetError, DatasetView, Datasets, FileView};
use crate::{accounts::User, db::Pool, now};
use bytes::Bytes;
use futures_util::Stream;
use gantry_core::datasets::{self as rules, check_quota};
use std::{io, sync::Arc};

pub struct BeginUpload<'a> {
    pub code: &'a str,
    pub version: &'a str,
    pub name: &'a str,
    pub replace: bool,
    /// The file's length when known (Content-Length, Upload-Length).
    pub total: Option<u64>,
    pub resumable: bool,
}

/// A reserved upload: its row, where it goes, and the bytes already held.
#[derive(Clone)]
pub struct Upload {
    pub id: i64,
    pub temp: String,
    pub key: String,
    pub dataset: DatasetView,
    pub version_id: i64,
    /// The version's name, for messages.
    pub version: String,
    pub name: String,
    pub total: Option<u64>,
    pub resumable: bool,
    pub user_id: i64,
    /// Bytes both stores hold already (0 unless resuming).
    pub offset: u64,
    /// Most bytes this upload may bring: the size limit and the group's quota.
    pub max_bytes: u64,
    /// A body that brings no byte for this long is cut (see [`BODY_IDLE`]).
    pub body_idle: std::time::Duration,
    pub(super) stores: [Arc<dyn Store>; 2],
    /// The server's quota for groups without their own, for the check at listing.
    pub(super) default_quota: u64,
}

/// How long an upload's body may bring nothing before the request is cut
/// (kept as far as it got, when resumable). A connection that died without
/// a word would otherwise hold its upload — and the writer lease that keeps
/// a second request out — for as long as the server runs.
pub const BODY_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload").field("id", &self.id).field("key", &self.key).field("offset", &self.offset).field("total", &self.total).finish()
    }
}

#[derive(Debug)]
pub enum UploadState {
    /// A resumable upload holds `offset` of `total` bytes.
    Partial { offset: u64, total: u64 },
    Done(FileView),
}

pub async fn begin_upload(pool: &Pool, stores: &Datasets, user: &User, b: &BeginUpload<'_>) -> Result<Upload, DatasetError> {
    rules::file_name(b.name)?;
    let (d, v) = catalog::version(pool, user, b.code, b.version).await?;
    catalog::may_write(user, &d)?;
    let limits = stores.limits();
    if let Some(total) = b.total.filter(|t| *t > limits.upload_max_bytes) {
        let _ = total;
        return Err(DatasetError::TooLarge { limit: limits.upload_max_bytes });
    }
    if b.resumable && b.total.is_none() {
        return Err(DatasetError::BadRequest("a resumable upload needs its length (Upload-Length)".into()));
    }
    let both = catalog::stores_of(stores, &d)?;
    let key = rules::storage_key(&d.code, &v.name, &d.category, b.name);
    let mut tx = crate::db::begin_immediate(pool).await?;
    // Read under the write lock: a seal that landed after the read above
    // must not get an upload (seal_version refuses while one exists).
    let sealed: Option<Option<i64>> = sqlx::query_scalar("SELECT sealed_at FROM dataset_versions WHERE id = ?").bind(v.id).fetch_optional(&mut *tx).await?;
    match sealed {
        None => return Err(DatasetError::NotFound(format!("version {} of dataset {}", b.version, b.code))),
        Some(Some(_)) => return Err(DatasetError::Conflict(format!("version {} of {} is sealed: it is read-only", b.version, b.code))),
        Some(None) => {}
    }
    let open: Option<(i64, String, i64, Option<i64>, i64)> =
        sqlx::query_as("SELECT id, temp_key, user_id, total_size, resumable FROM dataset_uploads WHERE version_id = ? AND name = ?")
            .bind(v.id)
            .bind(b.name)
            .fetch_optional(&mut *tx)
            .await?;
    let old_size: Option<i64> = sqlx::query_scalar("SELECT size FROM dataset_files WHERE version_id = ? AND name = ?")
        .bind(v.id)
        .bind(b.name)
        .fetch_optional(&mut *tx)
        .await?;
    let quota = catalog::quota_bytes(&mut *tx, d.group_id, limits.default_quota_bytes).await?;
    let (used, reserved) = catalog::usage(&mut tx, d.group_id).await?;
    let old = old_size.unwrap_or(0).max(0) as u64;
    let mut upload = Upload {
        id: 0,
        temp: String::new(),
        key,
        dataset: d.clone(),
        version_id: v.id,
        version: v.name.clone(),
        name: b.name.to_string(),
        total: b.total,
        resumable: b.resumable,
        user_id: user.id,
        offset: 0,
        max_bytes: limits.upload_max_bytes,
        body_idle: BODY_IDLE,
        stores: both,
        default_quota: limits.default_quota_bytes,
    };
    if let Some((id, temp, owner, total, resumable)) = open {
        let same = resumable == 1 && b.resumable && owner == user.id && total.map(|t| t as u64) == b.total;
        if !same {
            return Err(DatasetError::Conflict(format!("an upload of {} into {}/{} is already in progress", b.name, b.code, b.version)));
        }
        // Resuming: its own reservation is already counted. Asking for the
        // upload is activity too: it does not expire under a client that
        // is about to continue it.
        sqlx::query("UPDATE dataset_uploads SET touched_at = ? WHERE id = ?").bind(now()).bind(id).execute(&mut *tx).await?;
        upload.id = id;
        upload.temp = temp;
        upload.max_bytes = upload.max_bytes.min(b.total.unwrap_or(u64::MAX));
        tx.commit().await?;
        upload.offset = held(&upload.stores, &upload.temp).await?;
        return Ok(upload);
    }
    if old_size.is_some() && !b.replace {
        return Err(DatasetError::Conflict(format!("{} already exists in {}/{}; choose replace to overwrite it", b.name, b.code, b.version)));
    }
    let growth = b.total.unwrap_or(0).saturating_sub(old);
    check_quota(&d.group_name, quota, used, reserved, growth)?;
    // Of unknown length: it may use what the quota has left.
    let left = quota.saturating_sub(used.saturating_add(reserved)).saturating_add(old);
    upload.max_bytes = upload.max_bytes.min(b.total.unwrap_or(u64::MAX)).min(left);
    upload.temp = new_temp_name();
    let total = b.total.map(|t| t as i64);
    let at = now();
    upload.id = sqlx::query_scalar(
        "INSERT INTO dataset_uploads (version_id, name, temp_key, user_id, total_size, replace, resumable, created_at, touched_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(v.id)
    .bind(b.name)
    .bind(&upload.temp)
    .bind(user.id)
    .bind(total)
    .bind(b.replace as i64)
    .bind(b.resumable as i64)
    .bind(at)
    .bind(at)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(upload)
}

fn new_temp_name() -> String {
    let bytes: [u8; 16] = rand::random();
    store::hex(&bytes)
}

/// What both stores hold of a temporary object: the shorter of the two.
async fn held(stores: &[Arc<dyn Store>; 2], temp: &str) -> Result<u64, DatasetError> {
    let (a, b) = tokio::try_join!(stores[0].temp_len(temp), stores[1].temp_len(temp))
        .map_err(|e| DatasetError::store("asking the stores how much of the upload they hold failed", e))?;
    Ok(a.unwrap_or(0).min(b.unwrap_or(0)))
}

/// Streams `body` into both stores from `offset` (which must be what they
/// hold), then places the file when it is complete. Only one request
/// writes an upload at a time (see [`writing`]); a second is refused
/// before it touches anything.
pub async fn write_upload<S>(pool: &Pool, upload: &Upload, offset: u64, body: S, expected_sha256: Option<&str>) -> Result<UploadState, DatasetError>
where
    S: Stream<Item = io::Result<Bytes>> + Unpin + Send,
{
    let claim = writing::claim(pool, upload.id, &upload.temp).await?;
    let (size, streamed) = match receive(pool, upload, offset, body).await {
        Ok(Received::Complete { size, streamed }) => (size, streamed),
        Ok(Received::Partial { offset, total }) => {
            claim.release().await;
            return Ok(UploadState::Partial { offset, total });
        }
        Err(e) => {
            claim.release().await;
            return Err(e);
        }
    };
    // Placing runs to its end on its own task, holding the writer's lease
    // until it is done: a client that hangs up while the copies move into
    // place (a dropped browser form request drops this future) must not
    // leave one store with the new file and the other with the old, nor
    // let a resumed request or a starting server take the upload meanwhile.
    let (pool, upload, expected) = (pool.clone(), upload.clone(), expected_sha256.map(str::to_owned));
    let placing = tokio::spawn(async move {
        let placed = placing::place(&pool, &upload, size, streamed.as_ref(), expected.as_deref()).await;
        claim.release().await;
        placed
    });
    match placing.await {
        Ok(placed) => placed.map(UploadState::Done),
        Err(e) => Err(DatasetError::store("placing the upload failed on the server", format!("placing task: {e}"))),
    }
}

/// What a request's body brought: all of the file (and, when this request
/// carried all of it, its hashes), or part of a resumable one.
enum Received {
    Complete { size: u64, streamed: Option<Streamed> },
    Partial { offset: u64, total: u64 },
}

async fn receive<S>(pool: &Pool, upload: &Upload, offset: u64, body: S) -> Result<Received, DatasetError>
where
    S: Stream<Item = io::Result<Bytes>> + Unpin + Send,
{
    if offset != upload.offset {
        return Err(DatasetError::Conflict(format!("the server holds {} bytes of this upload, not {offset}; continue from {}", upload.offset, upload.offset)));
    }
    let (size, streamed) = match pipeline::stream_into(upload, offset, body).await {
        Ok(r) => (r.size, r.hashes),
        Err(e) => {
            let keep = upload.resumable && matches!(e, DatasetError::Incomplete(_));
            if !keep {
                placing::discard(pool, upload).await;
            }
            return Err(e);
        }
    };
    match upload.total {
        Some(total) if size < total && upload.resumable => return Ok(Received::Partial { offset: size, total }),
        Some(total) if size < total => {
            placing::discard(pool, upload).await;
            return Err(DatasetError::Incomplete(format!("the body ended after {size} of {total} bytes; nothing was kept")));
        }
        _ => {}
    }
    // The hashes of the whole file were computed while streaming only when
    // this request carried all of it; otherwise the read-back decides.
    Ok(Received::Complete { size, streamed: (offset == 0).then_some(streamed) })
}

/// Bytes held and declared of a resumable upload the user started.
pub async fn upload_status(pool: &Pool, stores: &Datasets, user: &User, code: &str, version: &str, name: &str) -> Result<(u64, u64), DatasetError> {
    let (d, v) = catalog::version(pool, user, code, version).await?;
    catalog::may_write(user, &d)?;
    let row: Option<(String, Option<i64>)> = sqlx::query_as("SELECT temp_key, total_size FROM dataset_uploads WHERE version_id = ? AND name = ? AND resumable = 1")
        .bind(v.id)
        .bind(name)
        .fetch_optional(pool)
        .await?;
    let (temp, total) = row.ok_or_else(|| DatasetError::NotFound(format!("upload of {name} into {code}/{version}")))?;
    let both = catalog::stores_of(stores, &d)?;
    Ok((held(&both, &temp).await?, total.unwrap_or(0).max(0) as u64))
}

/// Cancels an upload in progress: its temporary objects and reservation
/// go. While another request writes it (holds its lease), cancel is
/// refused: that request would go on writing into removed objects, and
/// could still list the file.
pub async fn cancel_upload(pool: &Pool, stores: &Datasets, user: &User, code: &str, version: &str, name: &str) -> Result<(), DatasetError> {
    let (d, v) = catalog::version(pool, user, code, version).await?;
    catalog::may_write(user, &d)?;
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT id, temp_key FROM dataset_uploads WHERE version_id = ? AND name = ?").bind(v.id).bind(name).fetch_optional(pool).await?;
    let (id, temp) = row.ok_or_else(|| DatasetError::NotFound(format!("upload of {name} into {code}/{version}")))?;
    let claim = writing::claim(pool, id, &temp).await.map_err(|e| match e {
        DatasetError::Busy(_) => DatasetError::Busy(format!(
            "another request is writing this upload of {name} now; cancel it once that request has ended (a lost one lets go within {} s)",
            writing::LEASE_SECS
        )),
        other => other,
    })?;
    let both = catalog::stores_of(stores, &d)?;
    placing::remove_temps(&both, &temp).await;
    let removed = sqlx::query("DELETE FROM dataset_uploads WHERE id = ? AND temp_key = ?").bind(id).bind(&temp).execute(pool).await;
    claim.release().await;
    removed?;
    Ok(())
}

/// Removes an upload this request began and could not finish (its
/// request went away): the upload itself, not whatever now has its name.
pub async fn abandon_upload(pool: &Pool, upload: &Upload) {
    placing::discard(pool, upload).await;
}
