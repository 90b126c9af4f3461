//! The first step of an upload: its row in `dataset_uploads`, which
//! reserves its name in the version and its length against the group's
//! quota — or, for a resumable upload asked for again, the row it already
//! has. Everything that can refuse an upload before a byte is stored is
//! checked here, in one `BEGIN IMMEDIATE` transaction.
//!
//! The upload page names the file it sends (a fingerprint: its
//! modification time and a hash of its first and last bytes). Its
//! unfinished upload is continued only for the same file: one that holds
//! bytes of another file of the same name and length is started over, as
//! the old file's first bytes followed by the new one's last would be a
//! file that never existed. Scripts send no fingerprint and find their
//! upload by name and length.

use super::{
    catalog,
    store::{self, Store},
    upload::{self, QuotaRoom, Upload, BODY_IDLE},
    writing, DatasetError, Datasets,
};
use crate::{accounts::User, db::Pool, now};
use gantry_core::datasets::{self as rules, check_quota};
use sqlx::SqliteConnection;
use std::sync::Arc;

pub struct BeginUpload<'a> {
    pub code: &'a str,
    pub version: &'a str,
    pub name: &'a str,
    pub replace: bool,
    /// The file's length when known (Content-Length, Upload-Length).
    pub total: Option<u64>,
    pub resumable: bool,
}

/// Begins an upload, or finds the user's unfinished resumable upload of
/// that name and length (asking again for it).
pub async fn begin_upload(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    b: &BeginUpload<'_>,
) -> Result<Upload, DatasetError> {
    begin_upload_of_file(pool, stores, user, b, None).await
}

/// [`begin_upload`] for the file `fingerprint` names: an unfinished upload
/// of that name and length is continued only if it holds bytes of that
/// file. One holding another file's (another fingerprint, or none: a
/// script's, whose bytes nobody can vouch for) is thrown away as Cancel
/// would, and this upload starts at 0.
pub async fn begin_upload_of_file(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    b: &BeginUpload<'_>,
    fingerprint: Option<&str>,
) -> Result<Upload, DatasetError> {
    if let Some(f) = fingerprint {
        check_fingerprint(f)?;
    }
    match open(pool, stores, user, b, fingerprint, false).await? {
        Opened::Upload(up) => return Ok(*up),
        Opened::OtherFile(held) => start_over(pool, held, b.name).await?,
    }
    match open(pool, stores, user, b, fingerprint, false).await? {
        Opened::Upload(up) => Ok(*up),
        Opened::OtherFile(_) => Err(DatasetError::Conflict(format!(
            "another upload of {} into {}/{} began meanwhile",
            b.name, b.code, b.version
        ))),
    }
}

/// The user's unfinished resumable upload of `name`, to continue it: only
/// ever found, never begun — a request continuing an upload that was
/// cancelled or expired meanwhile must not start a new one in its place
/// (404). With a fingerprint, only the upload of that file: a piece of
/// one file is never written into another's.
pub async fn resume_upload(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    code: &str,
    version: &str,
    name: &str,
    fingerprint: Option<&str>,
) -> Result<Upload, DatasetError> {
    if let Some(f) = fingerprint {
        check_fingerprint(f)?;
    }
    let b = BeginUpload { code, version, name, replace: false, total: None, resumable: true };
    match open(pool, stores, user, &b, fingerprint, true).await? {
        Opened::Upload(up) => Ok(*up),
        Opened::OtherFile(_) => Err(DatasetError::Conflict(format!(
            "the unfinished upload of {name} into {code}/{version} now holds a different file (it was chosen again, perhaps in another tab); choose this file again to start it over"
        ))),
    }
}

/// The most a fingerprint may be: the page's is about 30 characters.
const FINGERPRINT_MAX: usize = 128;

fn check_fingerprint(f: &str) -> Result<(), DatasetError> {
    if f.is_empty() || f.len() > FINGERPRINT_MAX || !f.bytes().all(|c| c.is_ascii_graphic()) {
        return Err(DatasetError::BadRequest(format!(
            "a file's fingerprint must be 1 to {FINGERPRINT_MAX} visible ASCII characters"
        )));
    }
    Ok(())
}

enum Opened {
    Upload(Box<Upload>),
    /// The user's unfinished upload of this name and length holds bytes
    /// of another file.
    OtherFile(Held),
}

struct Held {
    id: i64,
    temp: String,
    replace: bool,
    key: String,
    stores: [Arc<dyn Store>; 2],
}

/// Throws away an unfinished upload of another file. Not under a request
/// that is writing it now: that one is left to end (409).
async fn start_over(pool: &Pool, held: Held, name: &str) -> Result<(), DatasetError> {
    match upload::discard_held(pool, &held.stores, held.id, &held.temp, held.replace, &held.key).await {
        // Gone meanwhile: nothing left to throw away.
        Ok(()) | Err(DatasetError::NotFound(_)) => Ok(()),
        Err(DatasetError::Busy(_)) => Err(DatasetError::Busy(format!(
            "another request is writing the unfinished upload of {name} (a different file) now; choose the file again once it has ended (a lost one lets go within {} s)",
            writing::LEASE_SECS
        ))),
        Err(e) => Err(e),
    }
}

async fn open(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    b: &BeginUpload<'_>,
    fingerprint: Option<&str>,
    find_only: bool,
) -> Result<Opened, DatasetError> {
    rules::file_name(b.name)?;
    let (d, v) = catalog::version(pool, user, b.code, b.version).await?;
    catalog::may_write(user, &d)?;
    let limits = stores.limits();
    if b.total.is_some_and(|t| t > limits.upload_max_bytes) {
        return Err(DatasetError::TooLarge { limit: limits.upload_max_bytes });
    }
    if b.resumable && b.total.is_none() && !find_only {
        return Err(DatasetError::BadRequest("a resumable upload needs its length (Upload-Length)".into()));
    }
    let both = catalog::stores_of(stores, &d)?;
    let key = rules::storage_key(&d.code, &v.name, &d.category, b.name);
    let mut tx = crate::db::begin_immediate(pool).await?;
    // Read under the write lock: a seal that landed after the read above
    // must not get an upload (seal_version refuses while one exists).
    let sealed: Option<Option<i64>> = sqlx::query_scalar("SELECT sealed_at FROM dataset_versions WHERE id = ?")
        .bind(v.id)
        .fetch_optional(&mut *tx)
        .await?;
    match sealed {
        None => return Err(DatasetError::NotFound(format!("version {} of dataset {}", b.version, b.code))),
        Some(Some(_)) => {
            return Err(DatasetError::Conflict(format!(
                "version {} of {} is sealed: it is read-only",
                b.version, b.code
            )))
        }
        Some(None) => {}
    }
    let open: Option<(i64, String, i64, Option<i64>, i64, bool, Option<String>)> =
        sqlx::query_as("SELECT id, temp_key, user_id, total_size, resumable, replace, fingerprint FROM dataset_uploads WHERE version_id = ? AND name = ?")
            .bind(v.id)
            .bind(b.name)
            .fetch_optional(&mut *tx)
            .await?;
    let old_size: Option<i64> = sqlx::query_scalar("SELECT size FROM dataset_files WHERE version_id = ? AND name = ?")
        .bind(v.id)
        .bind(b.name)
        .fetch_optional(&mut *tx)
        .await?;
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
        replace: b.replace,
        user_id: user.id,
        offset: 0,
        max_bytes: limits.upload_max_bytes,
        body_idle: BODY_IDLE,
        stores: both,
        default_quota: limits.default_quota_bytes,
        room: None,
    };
    match open {
        Some((id, temp, owner, total, resumable, replace, held_file)) => {
            let total = total.map(|t| t.max(0) as u64);
            let same = resumable == 1 && b.resumable && owner == user.id && (find_only || total == b.total);
            if !same {
                return Err(DatasetError::Conflict(format!(
                    "an upload of {} into {}/{} is already in progress",
                    b.name, b.code, b.version
                )));
            }
            if fingerprint.is_some_and(|f| held_file.as_deref() != Some(f)) {
                return Ok(Opened::OtherFile(Held { id, temp, replace, key: upload.key, stores: upload.stores }));
            }
            // Resuming: its own reservation is already counted. Asking for the
            // upload is activity too: it does not expire under a client that
            // is about to continue it.
            sqlx::query("UPDATE dataset_uploads SET touched_at = ? WHERE id = ?")
                .bind(now())
                .bind(id)
                .execute(&mut *tx)
                .await?;
            upload.id = id;
            upload.temp = temp;
            upload.replace = replace;
            upload.total = total;
            upload.max_bytes = upload.max_bytes.min(total.unwrap_or(u64::MAX));
            tx.commit().await?;
            upload.offset = held(&upload.stores, &upload.temp).await?;
            return Ok(Opened::Upload(Box::new(upload)));
        }
        None if find_only => {
            return Err(DatasetError::NotFound(format!("upload of {} into {}/{}", b.name, b.code, b.version)))
        }
        None => {}
    }
    if old_size.is_some() && !b.replace {
        return Err(DatasetError::Conflict(format!(
            "{} already exists in {}/{}; choose replace to overwrite it",
            b.name, b.code, b.version
        )));
    }
    refuse_folder_clash(&mut tx, v.id, b).await?;
    let quota = catalog::quota_bytes(&mut *tx, d.group_id, limits.default_quota_bytes).await?;
    let (used, reserved) = catalog::usage(&mut tx, d.group_id).await?;
    let old = old_size.unwrap_or(0).max(0) as u64;
    let growth = b.total.unwrap_or(0).saturating_sub(old);
    check_quota(&d.group_name, quota, used, reserved, growth)?;
    // Of unknown length: it may use what the quota has left; a body that
    // brings more is refused with these numbers.
    let left = quota.saturating_sub(used.saturating_add(reserved)).saturating_add(old);
    upload.max_bytes = upload.max_bytes.min(b.total.unwrap_or(u64::MAX)).min(left);
    upload.room = Some(QuotaRoom { group: d.group_name.clone(), quota, used, reserved, old });
    upload.temp = new_temp_name();
    let total = b.total.map(|t| t as i64);
    let at = now();
    upload.id = sqlx::query_scalar(
        "INSERT INTO dataset_uploads (version_id, name, temp_key, user_id, total_size, replace, resumable, created_at, touched_at, fingerprint)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
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
    .bind(fingerprint)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Opened::Upload(Box::new(upload)))
}

/// A name that is a folder of another file ("a" beside "a/b") or has a
/// file for one of its folders ("a/b" beside "a") cannot be stored: a
/// directory store cannot hold both, and the file page could not show
/// them. Refused with the duplicates, before a byte is received — listed
/// files and uploads in progress alike (their names are taken too).
async fn refuse_folder_clash(
    tx: &mut SqliteConnection,
    version_id: i64,
    b: &BeginUpload<'_>,
) -> Result<(), DatasetError> {
    // `?2` lies under `name`, or `name` under `?2`.
    const CLASH: &str = "version_id = ?1 AND (substr(?2, 1, length(name) + 1) = name || '/' OR substr(name, 1, length(?2) + 1) = ?2 || '/')";
    let sql = format!(
        "SELECT name FROM dataset_files WHERE {CLASH} UNION ALL SELECT name FROM dataset_uploads WHERE {CLASH} LIMIT 1"
    );
    let clash: Option<String> = sqlx::query_scalar(&sql).bind(version_id).bind(b.name).fetch_optional(&mut *tx).await?;
    let Some(other) = clash else { return Ok(()) };
    let at = format!("{}/{}", b.code, b.version);
    Err(DatasetError::Conflict(if other.len() < b.name.len() {
        format!(
            "{} cannot be stored in {at}: {other} is a file there, so it cannot also be a folder; choose another name",
            b.name
        )
    } else {
        format!("{} cannot be stored in {at}: it is a folder there, holding {other}; choose another name", b.name)
    }))
}

fn new_temp_name() -> String {
    let bytes: [u8; 16] = rand::random();
    store::hex(&bytes)
}

/// What both stores hold of a temporary object: the shorter of the two.
pub(super) async fn held(stores: &[Arc<dyn Store>; 2], temp: &str) -> Result<u64, DatasetError> {
    let (a, b) = tokio::try_join!(stores[0].temp_len(temp), stores[1].temp_len(temp))
        .map_err(|e| DatasetError::store("asking the stores how much of the upload they hold failed", e))?;
    Ok(a.unwrap_or(0).min(b.unwrap_or(0)))
}
