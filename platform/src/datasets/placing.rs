//! The last step of an upload: read both temporary copies back, compare
//! their hashes with each other (and with what was streamed, and the
//! SHA-256 with the client's figure if it sent one), check and reserve in
//! the database that the file may be listed ([`listing::reserve`]), move
//! both copies into place — central first, then the region's — and list
//! the file. Until the row is written nobody sees the file.
//!
//! A replace keeps the listed file's copies aside (a second name, not a
//! copy, in a directory) until the new file is listed: whatever fails
//! after the first move puts them back, so a failed replace leaves the
//! listed file as it was.

use super::{
    error::{role, CENTRAL, REGION},
    listing,
    store::{self, Store},
    upload::Upload,
    DatasetError, FileView,
};
use crate::db::Pool;
use std::sync::Arc;

/// What was hashed while the body streamed, when one request carried the
/// whole file.
#[derive(Debug, Clone)]
pub(super) struct Streamed {
    pub sha256: String,
    pub crc64: String,
}

/// Verifies, reserves, places and lists a complete upload; on any failure
/// nothing of it is left and a replaced file is as it was.
pub(super) async fn place(
    pool: &Pool,
    upload: &Upload,
    size: u64,
    streamed: Option<&Streamed>,
    expected: Option<&str>,
) -> Result<FileView, DatasetError> {
    let checked = async {
        let sha = verify(upload, size, streamed, expected).await?;
        Ok::<_, DatasetError>((sha, listing::reserve(pool, upload, size).await?))
    };
    let (sha, replacing) = match checked.await {
        Ok(x) => x,
        Err(e) => {
            discard(pool, upload).await;
            // A deleted version took the copies with it: that, not a store
            // failing to read them back, is what the person is told.
            return Err(if version_gone(pool, upload).await { version_deleted(upload) } else { e });
        }
    };
    let aside = format!("{}.old", upload.temp);
    let mut kept = [false; 2];
    if replacing {
        for (i, s) in upload.stores.iter().enumerate() {
            match s.copy_to_temp(&upload.key, &aside).await {
                Ok(k) => kept[i] = k,
                Err(e) => {
                    remove_temps(&upload.stores, &aside).await;
                    discard(pool, upload).await;
                    let public = format!(
                        "keeping the listed {} in {} while it is replaced failed; nothing was changed",
                        upload.name,
                        role(i)
                    );
                    return Err(DatasetError::store(public, format!("{}: {e}", s.describe())));
                }
            }
        }
    }
    for (i, s) in upload.stores.iter().enumerate() {
        if let Err(e) = s.rename_into_place(&upload.temp, &upload.key).await {
            let steps = [0, 1].map(|j| {
                if j < i {
                    Step::Placed
                } else if j == i {
                    Step::Failed
                } else {
                    Step::Untouched
                }
            });
            let undone = undo(pool, upload, &aside, kept, steps).await;
            discard(pool, upload).await;
            return Err(DatasetError::store(
                format!("placing the file in {} failed; {undone}", role(i)),
                format!("{}: {e}", s.describe()),
            ));
        }
    }
    match listing::list(pool, upload, size, &sha).await {
        Ok(view) => {
            if replacing {
                remove_temps(&upload.stores, &aside).await;
            }
            Ok(view)
        }
        Err(e) => {
            undo(pool, upload, &aside, kept, [Step::Placed; 2]).await;
            discard(pool, upload).await;
            Err(e)
        }
    }
}

/// How far the move into place got in one store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Not tried: the key is as it was.
    Untouched,
    /// Tried and failed: the key may be as it was, or not.
    Failed,
    Placed,
}

/// Reads both copies back (each on its own task: two cores hash at once)
/// and answers the file's SHA-256, or why the copies cannot be listed.
/// CRC-64 proves a copy holds the bytes received; SHA-256, the figure
/// users see, is read back only when no single request streamed it all.
async fn verify(
    upload: &Upload,
    size: u64,
    streamed: Option<&Streamed>,
    expected: Option<&str>,
) -> Result<String, DatasetError> {
    let read = |i: usize, with_sha256: bool| {
        let (s, key) = (upload.stores[i].clone(), store::temp_key(&upload.temp));
        async move {
            let which = s.describe();
            let task = tokio::spawn(async move { s.digest(&key, with_sha256).await });
            let failed = |e: String| {
                DatasetError::store(
                    format!("reading the copy in {} back failed; nothing was kept", role(i)),
                    format!("{which}: {e}"),
                )
            };
            match task.await {
                Ok(Ok(d)) => Ok(d),
                Ok(Err(e)) => Err(failed(e.to_string())),
                Err(e) => Err(failed(e.to_string())),
            }
        }
    };
    let (a, b) = tokio::try_join!(read(0, streamed.is_none()), read(1, false))?;
    let sha = streamed.map(|s| s.sha256.clone()).or(a.sha256.clone()).unwrap_or_default();
    let mismatch = if a.size != size || b.size != size {
        Some(format!("the stores hold {} and {} bytes, the upload sent {size}", a.size, b.size))
    } else if a.crc64 != b.crc64 {
        Some(format!("the two copies differ (CRC-64 {} in {CENTRAL}, {} in {REGION})", a.crc64, b.crc64))
    } else if streamed.is_some_and(|s| s.crc64 != a.crc64) {
        Some(format!(
            "the stored copies (CRC-64 {}) differ from what was received ({})",
            a.crc64,
            streamed.map(|s| s.crc64.as_str()).unwrap_or_default()
        ))
    } else if expected.is_some_and(|e| !e.eq_ignore_ascii_case(&sha)) {
        Some(format!("the file's SHA-256 is {sha}, not {} as the client said", expected.unwrap_or_default()))
    } else {
        None
    };
    match mismatch {
        Some(why) => Err(DatasetError::Checksum(format!("checksum check failed: {why}; nothing was kept"))),
        None => Ok(sha),
    }
}

/// Takes the new file out of place after a failure: a store that held a
/// listed file gets it back from aside, the others lose the key (nothing
/// was there before). Says what became of the listed file; if it could not
/// be put back everywhere, it is no longer listed (a listed file has both
/// copies), and what could not be put back stays aside for the log's reader.
async fn undo(pool: &Pool, upload: &Upload, aside: &str, kept: [bool; 2], steps: [Step; 2]) -> &'static str {
    // The version was deleted meanwhile: nothing is put back under it (a
    // move recreates the folder its delete removed); both files go.
    if version_gone(pool, upload).await {
        for s in upload.stores.iter() {
            for key in [upload.key.clone(), store::temp_key(aside)] {
                if let Err(e) = s.delete(&key).await {
                    tracing::error!(error = %e, store = %s.describe(), %key, "could not remove a file of a deleted version");
                }
            }
        }
        return "its version was deleted meanwhile";
    }
    let mut restored = true;
    for (i, s) in upload.stores.iter().enumerate() {
        let result = match (kept[i], steps[i]) {
            (true, Step::Untouched) => s.delete(&store::temp_key(aside)).await,
            (false, Step::Untouched) => Ok(()),
            (false, _) => s.delete(&upload.key).await,
            (true, step) => put_back(s, upload, aside, step).await,
        };
        if let Err(e) = result {
            let kept_at = store::temp_key(aside);
            tracing::error!(error = %e, store = %s.describe(), key = %upload.key, aside = %kept_at, "could not take a failed upload out of place");
            restored &= !kept[i];
        }
    }
    match (kept.contains(&true), restored) {
        (false, _) => "nothing was kept",
        (true, true) => "the listed file was kept as it was",
        (true, false) => {
            let unlisted = sqlx::query("DELETE FROM dataset_files WHERE version_id = ? AND name = ?")
                .bind(upload.version_id)
                .bind(&upload.name)
                .execute(pool)
                .await;
            if let Err(e) = unlisted {
                tracing::error!(error = %e, key = %upload.key, "could not unlist a file whose copies were lost");
            }
            "the listed file could not be put back and is no longer listed"
        }
    }
}

/// Puts the listed file back at its key from aside. Where the move into
/// place failed, the key may never have changed: if putting back fails
/// too, the key still holding what was kept aside is as good.
async fn put_back(s: &Arc<dyn Store>, upload: &Upload, aside: &str, step: Step) -> std::io::Result<()> {
    let moved = s.rename_into_place(aside, &upload.key).await;
    match moved {
        Err(e) if step == Step::Failed => {
            let kept_at = store::temp_key(aside);
            let (now, before) = tokio::try_join!(s.digest(&upload.key, false), s.digest(&kept_at, false))?;
            if now != before {
                return Err(e);
            }
            s.delete(&kept_at).await
        }
        // Where the key never changed, it and the copy aside are two names
        // of one file in a directory, and renaming one onto the other does
        // nothing (POSIX): the name aside must go by itself.
        Ok(()) => s.delete(&store::temp_key(aside)).await,
        Err(e) => Err(e),
    }
}

/// Whether the upload's version is no more (a database error is no answer).
async fn version_gone(pool: &Pool, upload: &Upload) -> bool {
    let version: Result<Option<i64>, _> = sqlx::query_scalar("SELECT id FROM dataset_versions WHERE id = ?")
        .bind(upload.version_id)
        .fetch_optional(pool)
        .await;
    matches!(version, Ok(None))
}

/// The refusal of an upload whose version was deleted while it was under way.
pub(super) fn version_deleted(upload: &Upload) -> DatasetError {
    DatasetError::Conflict(format!(
        "version {} of {} was deleted while {} was uploading; nothing was kept",
        upload.version, upload.dataset.code, upload.name
    ))
}

/// The refusal of an upload whose row went while a request still wrote it
/// (cancelled, or expired).
pub(super) fn upload_ended(upload: &Upload) -> DatasetError {
    DatasetError::Conflict(format!(
        "the upload of {} into {}/{} was cancelled meanwhile; nothing was kept",
        upload.name, upload.dataset.code, upload.version
    ))
}

/// Removes an upload's temporary objects from both stores and its row
/// (its own row only: the id and the temporary object together).
pub(super) async fn discard(pool: &Pool, upload: &Upload) {
    remove_temps(&upload.stores, &upload.temp).await;
    if let Err(e) = listing::end_upload(pool, upload.id, &upload.temp).await {
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

/// Removes a replace upload's copy of the listed file kept aside (a name
/// of the listed file, or a copy): only once nothing needs putting back.
pub(super) async fn remove_aside(stores: &[Arc<dyn Store>; 2], temp: &str) {
    let key = store::temp_key(&format!("{temp}.old"));
    for s in stores {
        if let Err(e) = s.delete(&key).await {
            tracing::warn!(error = %e, store = %s.describe(), %key, "could not remove a copy kept aside; it is removed at the next start");
        }
    }
}
