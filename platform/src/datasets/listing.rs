//! The database side of placing a file, in two `BEGIN IMMEDIATE`
//! transactions around the moves into place ([`super::placing`]):
//!
//! - before: the upload may still be listed — its row is still its own,
//!   the version is open, and the group's quota has room for the bytes
//!   that actually arrived (an upload of unknown length reserved nothing
//!   when it began, so this is the check that holds the quota) — and those
//!   bytes are reserved until the file is listed;
//! - after: the file is listed and the upload's row goes.
//!
//! A replace marks the listed file's row as placing in the first and
//! clears the mark in the second (or, failed, once the listed file is back:
//! [`end_upload`]), so downloads never pair the row with bytes moving under
//! it ([`super::reading`]).
//!
//! Uploads finishing at once are counted one after the other.

use super::{catalog, upload::Upload, DatasetError, FileView};
use crate::{audit, db::Pool, now};
use gantry_core::datasets::check_quota;

/// Checks that the upload may be listed and reserves its `size` bytes;
/// answers whether it replaces a listed file.
pub(super) async fn reserve(pool: &Pool, upload: &Upload, size: u64) -> Result<bool, DatasetError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    let own: Option<(Option<i64>, bool)> =
        sqlx::query_as("SELECT total_size, replace FROM dataset_uploads WHERE id = ? AND temp_key = ?")
            .bind(upload.id)
            .bind(&upload.temp)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((own, replace)) = own else { return Err(gone(upload)) };
    // A seal is refused while this row exists, and the row was made with
    // the version open; read again all the same, as listing a file into a
    // sealed version must never happen, whatever removed that protection.
    let sealed: Option<Option<i64>> = sqlx::query_scalar("SELECT sealed_at FROM dataset_versions WHERE id = ?")
        .bind(upload.version_id)
        .fetch_optional(&mut *tx)
        .await?;
    match sealed {
        None => return Err(gone(upload)),
        Some(Some(_)) => {
            return Err(DatasetError::Conflict(format!(
                "{} was sealed while {} was uploading; nothing was kept",
                version_of(upload),
                upload.name
            )))
        }
        Some(None) => {}
    }
    let listed: Option<i64> = sqlx::query_scalar("SELECT size FROM dataset_files WHERE version_id = ? AND name = ?")
        .bind(upload.version_id)
        .bind(&upload.name)
        .fetch_optional(&mut *tx)
        .await?;
    let d = &upload.dataset;
    let quota = catalog::quota_bytes(&mut *tx, d.group_id, upload.default_quota).await?;
    let (used, reserved) = catalog::usage(&mut tx, d.group_id).await?;
    // This upload's own reservation is not in the way of its own bytes (a
    // replace reserved only what it adds: `catalog::UPLOAD_RESERVATION`).
    let old = listed.unwrap_or(0).max(0) as u64;
    let own = (own.unwrap_or(0).max(0) as u64).saturating_sub(if replace { old } else { 0 });
    let others = reserved.saturating_sub(own);
    let growth = size.saturating_sub(old);
    if growth > 0 {
        check_quota(&d.group_name, quota, used, others, growth)?;
    }
    sqlx::query("UPDATE dataset_uploads SET total_size = ? WHERE id = ?")
        .bind(size as i64)
        .bind(upload.id)
        .execute(&mut *tx)
        .await?;
    if listed.is_some() {
        sqlx::query("UPDATE dataset_files SET placing = 1, placings = placings + 1 WHERE version_id = ? AND name = ?")
            .bind(upload.version_id)
            .bind(&upload.name)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(listed.is_some())
}

/// Lists the file (replacing the row of the file it replaces) and ends the upload.
pub(super) async fn list(pool: &Pool, upload: &Upload, size: u64, sha256: &str) -> Result<FileView, DatasetError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    let ended = sqlx::query("DELETE FROM dataset_uploads WHERE id = ? AND temp_key = ?")
        .bind(upload.id)
        .bind(&upload.temp)
        .execute(&mut *tx)
        .await?;
    if ended.rows_affected() == 0 {
        return Err(gone(upload));
    }
    let at = now();
    sqlx::query(
        "INSERT INTO dataset_files (version_id, name, size, sha256, uploaded_by, uploaded_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (version_id, name) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
           uploaded_by = excluded.uploaded_by, uploaded_at = excluded.uploaded_at, placing = 0",
    )
    .bind(upload.version_id)
    .bind(&upload.name)
    .bind(size as i64)
    .bind(sha256)
    .bind(upload.user_id)
    .bind(at)
    .execute(&mut *tx)
    .await?;
    audit::record(
        &mut *tx,
        Some(upload.user_id),
        "dataset.file.upload",
        &format!("{} ({size} bytes, sha256 {sha256})", upload.key),
    )
    .await?;
    let uploaded_by: String =
        sqlx::query_scalar("SELECT username FROM users WHERE id = ?").bind(upload.user_id).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok(FileView {
        name: upload.name.clone(),
        size: size as i64,
        sha256: sha256.to_string(),
        uploaded_by,
        uploaded_at: at,
    })
}

/// Ends upload `id` (its row, named by id and temporary object) that was
/// not listed: a replace's placing mark on the listed file goes with it.
/// Call it once the listed file is back in both stores.
pub(super) async fn end_upload(pool: &Pool, id: i64, temp: &str) -> Result<(), DatasetError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    placed_back(&mut *tx, id, temp).await?;
    sqlx::query("DELETE FROM dataset_uploads WHERE id = ? AND temp_key = ?")
        .bind(id)
        .bind(temp)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Clears the placing mark upload `id` (with temporary object `temp`) set
/// on the file it replaces: the listed file is back in both stores. Only
/// while the row is the upload's own (the writer's lease held, or ended
/// in the same transaction): another upload of the name may be placing.
pub(super) async fn placed_back(db: impl sqlx::SqliteExecutor<'_>, id: i64, temp: &str) -> Result<(), DatasetError> {
    sqlx::query("UPDATE dataset_files SET placing = 0 WHERE (version_id, name) IN (SELECT version_id, name FROM dataset_uploads WHERE id = ? AND temp_key = ?)")
        .bind(id)
        .bind(temp)
        .execute(db)
        .await?;
    Ok(())
}

/// Clears the placing mark of every file no upload is placing any more
/// (its upload ended with its process, or expired). The mark and the
/// upload's row otherwise go in one transaction: this only mends what a
/// crash left.
pub(super) async fn clear_stale_placing(pool: &Pool) -> Result<u64, DatasetError> {
    let cleared = sqlx::query(
        "UPDATE dataset_files SET placing = 0 WHERE placing = 1
           AND NOT EXISTS (SELECT 1 FROM dataset_uploads u WHERE u.version_id = dataset_files.version_id AND u.name = dataset_files.name)",
    )
    .execute(pool)
    .await?;
    Ok(cleared.rows_affected())
}

/// The upload's row is no longer its own: it was cancelled, its version
/// deleted, or it expired.
fn gone(upload: &Upload) -> DatasetError {
    DatasetError::Conflict(format!(
        "the upload of {} into {} was cancelled meanwhile; nothing was kept",
        upload.name,
        version_of(upload)
    ))
}

fn version_of(upload: &Upload) -> String {
    format!("{}/{}", upload.dataset.code, upload.version)
}
