//! Uploads: a reservation row, then the body streamed into a temporary
//! object in both stores at once ([`super::pipeline`]: hashed on the way,
//! memory bounded by a few batches), then [`super::placing`] verifies both copies and
//! moves them into place. A one-request upload that does not finish
//! leaves nothing; a resumable one keeps its temporary objects (invisible)
//! until it is resumed, cancelled or expires.

use super::{
    access::Access,
    begin::held,
    catalog, cleanup, failure, listing, pipeline,
    placing::{self, Streamed},
    store::Store,
    writing, DatasetError, DatasetView, Datasets, FileView,
};
use crate::{accounts::User, db::Pool};
use bytes::Bytes;
use futures_util::Stream;
use gantry_core::datasets::{self as rules, QuotaRefusal};
use std::{io, sync::Arc};

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
    /// It replaces a listed file (as the upload was begun).
    pub(super) replace: bool,
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
    /// The group's figures when a new upload began: what an upload of
    /// unknown length that outgrows `max_bytes` is refused with.
    pub(super) room: Option<QuotaRoom>,
}

/// A group's quota figures as an upload found them when it began.
#[derive(Debug, Clone)]
pub(super) struct QuotaRoom {
    pub group: String,
    pub quota: u64,
    pub used: u64,
    pub reserved: u64,
    /// The size of the listed file it replaces (0 if none).
    pub old: u64,
}

impl Upload {
    /// The refusal of a body that brought `size` bytes when its quota's
    /// room was the bound it passed (`None`: the size limit was).
    pub(super) fn over_quota(&self, size: u64) -> Option<QuotaRefusal> {
        let room = self.room.as_ref()?;
        let incoming = size.saturating_sub(room.old);
        rules::check_quota(&room.group, room.quota, room.used, room.reserved, incoming).err()
    }
}

/// How long an upload's body may bring nothing before the request is cut
/// (kept as far as it got, when resumable). A connection that died without
/// a word would otherwise hold its upload — and the writer lease that keeps
/// a second request out — for as long as the server runs.
pub const BODY_IDLE: std::time::Duration = std::time::Duration::from_secs(60);

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("id", &self.id)
            .field("key", &self.key)
            .field("offset", &self.offset)
            .field("total", &self.total)
            .finish()
    }
}

#[derive(Debug)]
pub enum UploadState {
    /// A resumable upload holds `offset` of `total` bytes.
    Partial {
        offset: u64,
        total: u64,
    },
    Done(FileView),
}

/// Streams `body` into both stores from `offset` (which must be what they
/// hold), then places the file when it is complete. Only one request
/// writes an upload at a time (see [`writing`]); a second is refused
/// before it touches anything. It stops when the uploader's account is
/// disabled or its sessions end meanwhile (a caller that knows what let
/// its request in says so: [`write_upload_as`]).
pub async fn write_upload<S>(
    pool: &Pool,
    upload: &Upload,
    offset: u64,
    body: S,
    expected_sha256: Option<&str>,
) -> Result<UploadState, DatasetError>
where
    S: Stream<Item = io::Result<Bytes>> + Unpin + Send,
{
    let access = Access::sessions_now(pool, upload.user_id).await?;
    write_upload_as(pool, upload, offset, body, expected_sha256, access).await
}

/// [`write_upload`] for a request that came in with `access`: once that
/// right ends, the upload stops at the next renewal of its lease, keeping
/// none of this request's bytes.
pub async fn write_upload_as<S>(
    pool: &Pool,
    upload: &Upload,
    offset: u64,
    body: S,
    expected_sha256: Option<&str>,
    access: Access,
) -> Result<UploadState, DatasetError>
where
    S: Stream<Item = io::Result<Bytes>> + Unpin + Send,
{
    let watch = writing::Watch { version_id: upload.version_id, access };
    let claim = writing::claim_to_write(pool, upload.id, &upload.temp, watch).await?;
    // A resumed replace whose earlier placing died between its moves gets
    // the listed file back first: placing again would keep aside, as the
    // listed file, what that placing had moved into place.
    if upload.resumable && upload.replace {
        let put_back = match cleanup::put_back_in(&upload.stores, &upload.temp, &upload.key).await {
            Ok(_) => listing::placed_back(pool, upload.id, &upload.temp).await,
            Err(e) => Err(e),
        };
        if let Err(e) = put_back {
            claim.release().await;
            return Err(e);
        }
    }
    let (size, streamed) = match receive(pool, upload, offset, body, claim.halted()).await {
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

async fn receive<S>(
    pool: &Pool,
    upload: &Upload,
    offset: u64,
    body: S,
    halt: tokio::sync::watch::Receiver<Option<writing::Halt>>,
) -> Result<Received, DatasetError>
where
    S: Stream<Item = io::Result<Bytes>> + Unpin + Send,
{
    if offset != upload.offset {
        return Err(DatasetError::Conflict(format!(
            "the server holds {} bytes of this upload, not {offset}; continue from {}",
            upload.offset, upload.offset
        )));
    }
    let (size, streamed) = match pipeline::stream_into(upload, offset, body, halt).await {
        Ok(r) => (r.size, r.hashes),
        Err(failure::Failed { error, kept }) => {
            if !kept {
                placing::discard(pool, upload).await;
            }
            return Err(error);
        }
    };
    match upload.total {
        Some(total) if size < total && upload.resumable => return Ok(Received::Partial { offset: size, total }),
        Some(total) if size < total => {
            placing::discard(pool, upload).await;
            return Err(DatasetError::Incomplete(format!(
                "the body ended after {size} of {total} bytes; nothing was kept"
            )));
        }
        _ => {}
    }
    // The hashes of the whole file were computed while streaming only when
    // this request carried all of it; otherwise the read-back decides.
    Ok(Received::Complete { size, streamed: (offset == 0).then_some(streamed) })
}

/// Bytes held and declared of a resumable upload the user started.
pub async fn upload_status(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    code: &str,
    version: &str,
    name: &str,
) -> Result<(u64, u64), DatasetError> {
    let (d, v) = catalog::version(pool, user, code, version).await?;
    catalog::may_write(user, &d)?;
    let row: Option<(String, Option<i64>)> = sqlx::query_as(
        "SELECT temp_key, total_size FROM dataset_uploads WHERE version_id = ? AND name = ? AND resumable = 1",
    )
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
pub async fn cancel_upload(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    code: &str,
    version: &str,
    name: &str,
) -> Result<(), DatasetError> {
    let (d, v) = catalog::version(pool, user, code, version).await?;
    catalog::may_write(user, &d)?;
    let row: Option<(i64, String, bool)> =
        sqlx::query_as("SELECT id, temp_key, replace FROM dataset_uploads WHERE version_id = ? AND name = ?")
            .bind(v.id)
            .bind(name)
            .fetch_optional(pool)
            .await?;
    let (id, temp, replace) =
        row.ok_or_else(|| DatasetError::NotFound(format!("upload of {name} into {code}/{version}")))?;
    let both = catalog::stores_of(stores, &d)?;
    let key = rules::storage_key(&d.code, &v.name, &d.category, name);
    discard_held(pool, &both, id, &temp, replace, &key).await.map_err(|e| match e {
        DatasetError::Busy(_) => DatasetError::Busy(format!(
            "another request is writing this upload of {name} now; cancel it once that request has ended (a lost one lets go within {} s)",
            writing::LEASE_SECS
        )),
        other => other,
    })
}

/// Throws away an unfinished upload, named by its row (id and temporary
/// object): its temporary objects and its reservation go. Refused (Busy)
/// while another request writes it.
pub(super) async fn discard_held(
    pool: &Pool,
    both: &[Arc<dyn Store>; 2],
    id: i64,
    temp: &str,
    replace: bool,
    key: &str,
) -> Result<(), DatasetError> {
    let claim = writing::claim(pool, id, temp).await?;
    // A replace whose placing died between its moves: the listed file goes
    // back where it was moved away before the copy kept aside goes. If
    // that fails the upload stays, for a later cancel or start to finish.
    if replace {
        if let Err(e) = cleanup::put_back_in(both, temp, key).await {
            claim.release().await;
            return Err(e);
        }
    }
    placing::remove_temps(both, temp).await;
    placing::remove_aside(both, temp).await;
    let removed = listing::end_upload(pool, id, temp).await;
    claim.release().await;
    removed
}

/// Removes an upload this request began and could not finish (its
/// request went away): the upload itself, not whatever now has its name.
pub async fn abandon_upload(pool: &Pool, upload: &Upload) {
    placing::discard(pool, upload).await;
}
