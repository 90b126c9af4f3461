//! The last step of an upload: read both temporary copies back, compare
//! their SHA-256 with each other (and with what was streamed, and with the
//! client's figure if it sent one), move them into place — central first,
//! then the region's; if the second fails the first is removed — and list
//! the file. Until the row is written nobody sees the file.

use super::{store::{self, Store}, upload::Upload, DatasetError, FileView};
use crate::{audit, db::Pool, now};
use std::sync::Arc;

pub(super) async fn place(pool: &Pool, upload: &Upload, size: u64, streamed: Option<&str>, expected: Option<&str>) -> Result<FileView, DatasetError> {
    let [central, region] = &upload.stores;
    let temp = store::temp_key(&upload.temp);
    let read_back = tokio::try_join!(
        async { store::checksum(central.as_ref(), &temp).await.map_err(|e| (central.describe(), e)) },
        async { store::checksum(region.as_ref(), &temp).await.map_err(|e| (region.describe(), e)) },
    );
    let ((size_a, sha_a), (size_b, sha_b)) = match read_back {
        Ok(x) => x,
        Err((which, e)) => {
            discard(pool, upload).await;
            return Err(DatasetError::Store(format!("reading the copy in the {which} back failed: {e}; nothing was kept")));
        }
    };
    let mismatch = if size_a != size || size_b != size {
        Some(format!("the stores hold {size_a} and {size_b} bytes, the upload sent {size}"))
    } else if sha_a != sha_b {
        Some(format!("the two copies differ (SHA-256 {sha_a} in the {}, {sha_b} in the {})", central.describe(), region.describe()))
    } else if streamed.is_some_and(|s| s != sha_a) {
        Some(format!("the stored copies (SHA-256 {sha_a}) differ from what was received ({})", streamed.unwrap_or_default()))
    } else if expected.is_some_and(|e| !e.eq_ignore_ascii_case(&sha_a)) {
        Some(format!("the file's SHA-256 is {sha_a}, not {} as the client said", expected.unwrap_or_default()))
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
    match list_file(pool, upload, size, &sha_a).await {
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
