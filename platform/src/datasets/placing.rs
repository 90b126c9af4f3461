//! The last step of an upload: read both temporary copies back, compare
//! their hashes with each other (and with what was streamed, and the
//! SHA-256 with the client's figure if it sent one), move them into place — central first,
//! then the region's; if the second fails the first is removed — and list
//! the file. Until the row is written nobody sees the file.

use super::{store::{self, Store}, upload::Upload, DatasetError, FileView};
use crate::{audit, db::Pool, now};
use std::sync::Arc;

/// What was hashed while the body streamed, when one request carried the
/// whole file.
#[derive(Debug, Clone)]
pub(super) struct Streamed {
    pub sha256: String,
    pub crc64: String,
}

pub(super) async fn place(pool: &Pool, upload: &Upload, size: u64, streamed: Option<&Streamed>, expected: Option<&str>) -> Result<FileView, DatasetError> {
    let [central, region] = &upload.stores;
    // Each copy is read back on its own task (two cores hash at once).
    // CRC-64 proves a copy holds the bytes received; SHA-256, the figure
    // users see, is read back only when no single request streamed it all.
    let read = |s: &Arc<dyn Store>, with_sha256: bool| {
        let (s, key) = (s.clone(), store::temp_key(&upload.temp));
        async move {
            let which = s.describe();
            let task = tokio::spawn(async move { s.digest(&key, with_sha256).await });
            match task.await {
                Ok(Ok(d)) => Ok(d),
                Ok(Err(e)) => Err((which, e.to_string())),
                Err(e) => Err((which, e.to_string())),
            }
        }
    };
    let read_back = tokio::try_join!(read(central, streamed.is_none()), read(region, false));
    let (a, b) = match read_back {
        Ok(x) => x,
        Err((which, e)) => {
            discard(pool, upload).await;
            return Err(DatasetError::Store(format!("reading the copy in the {which} back failed: {e}; nothing was kept")));
        }
    };
    let sha = streamed.map(|s| s.sha256.clone()).or(a.sha256.clone()).unwrap_or_default();
    let mismatch = if a.size != size || b.size != size {
        Some(format!("the stores hold {} and {} bytes, the upload sent {size}", a.size, b.size))
    } else if a.crc64 != b.crc64 {
        Some(format!("the two copies differ (CRC-64 {} in the {}, {} in the {})", a.crc64, central.describe(), b.crc64, region.describe()))
    } else if streamed.is_some_and(|s| s.crc64 != a.crc64) {
        Some(format!("the stored copies (CRC-64 {}) differ from what was received ({})", a.crc64, streamed.map(|s| s.crc64.as_str()).unwrap_or_default()))
    } else if expected.is_some_and(|e| !e.eq_ignore_ascii_case(&sha)) {
        Some(format!("the file's SHA-256 is {sha}, not {} as the client said", expected.unwrap_or_default()))
    } else {
        None
    };
    if let Some(why) = mismatch {
        discard(pool, upload).await;
        return Err(DatasetError::Checksum(format!("checksum check failed: {why}; nothing was kept")));
    }
    if let Err(e) = central.rename_into_place(&upload.temp, &upload.key).await {
        discard(pool, upload).await;
        return Err(DatasetError::Store(format!("placing the file in the {} failed: {e}; nothing was kept", central.describe())));
    }
    if let Err(e) = region.rename_into_place(&upload.temp, &upload.key).await {
        let _ = central.delete(&upload.key).await;
        discard(pool, upload).await;
        // A replaced file's old central copy was overwritten: its row goes too.
        let _ = sqlx::query("DELETE FROM dataset_files WHERE version_id = ? AND name = ?").bind(upload.version_id).bind(&upload.name).execute(pool).await;
        return Err(DatasetError::Store(format!(
            "placing the file in the {} failed: {e}; the copy in the {} was removed",
            region.describe(),
            central.describe()
        )));
    }
    match list_file(pool, upload, size, &sha).await {
        Ok(view) => Ok(view),
        Err(e) => {
            let _ = tokio::join!(central.delete(&upload.key), region.delete(&upload.key));
            discard(pool, upload).await;
            Err(e)
        }
    }
}

async fn list_file(pool: &Pool, upload: &Upload, size: u64, sha256: &str) -> Result<FileView, DatasetError> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let at = now();
    sqlx::query(
        "INSERT INTO dataset_files (version_id, name, size, sha256, uploaded_by, uploaded_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (version_id, name) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
           uploaded_by = excluded.uploaded_by, uploaded_at = excluded.uploaded_at",
    )
    .bind(upload.version_id)
    .bind(&upload.name)
    .bind(size as i64)
    .bind(sha256)
    .bind(upload.user_id)
    .bind(at)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM dataset_uploads WHERE id = ?").bind(upload.id).execute(&mut *tx).await?;
    audit::record(&mut *tx, Some(upload.user_id), "dataset.file.upload", &format!("{} ({size} bytes, sha256 {sha256})", upload.key)).await?;
    let uploaded_by: String = sqlx::query_scalar("SELECT username FROM users WHERE id = ?").bind(upload.user_id).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok(FileView { name: upload.name.clone(), size: size as i64, sha256: sha256.to_string(), uploaded_by, uploaded_at: at })
}

/// Removes an upload's temporary objects from both stores and its row.
pub(super) async fn discard(pool: &Pool, upload: &Upload) {
    remove_temps(&upload.stores, &upload.temp).await;
    if let Err(e) = sqlx::query("DELETE FROM dataset_uploads WHERE id = ?").bind(upload.id).execute(pool).await {
        tracing::warn!(error = %e, upload = upload.id, "could not remove an upload's row; it is removed at the next start");
    }
}

pub(super) async fn remove_temps(stores: &[Arc<dyn Store>; 2], temp: &str) {
    for s in stores {
        for key in [store::temp_key(temp), store::temp_key(&format!("{temp}.next"))] {
            if let Err(e) = s.delete(&key).await {
                tracing::warn!(error = %e, store = %s.describe(), %key, "could not remove a temporary upload; it is removed at the next start");
            }
        }
    }
}
