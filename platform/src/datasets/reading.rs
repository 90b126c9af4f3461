//! What a download reads: the listed file, and afterwards whether the
//! bytes it opened meanwhile are that file's.
//!
//! A replace moves its new copies onto the listed file's key before it
//! rewrites the row (and a failed one moves the listed file back): in
//! between, the key holds bytes the row does not describe. The row says
//! so — `placing` is set from the moment the replace may move a copy until
//! the row is rewritten or the listed file is back, and `placings` counts
//! the replaces that began — so a download reads the row, opens the file,
//! and reads the row again ([`Listed::still_listed`]). The opened bytes
//! are the row's when no replace was placing at the first read and none
//! began by the second: a replace still moving copies when the file was
//! opened either began before the first read — and was then placing at
//! that read — or after it, and then the count moved.

use super::{catalog, DatasetError, DatasetView, FileView};
use crate::{accounts::User, db::Pool};

/// A listed file as a download found it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub dataset: DatasetView,
    pub file: FileView,
    version_id: i64,
    placings: i64,
}

/// The listed file `name` of `code`/`version` for `user` (not found if the
/// dataset is invisible to them); refused while a replace of it is placing
/// its copies (the stored bytes may not be the listed file's).
pub async fn listed_file(
    pool: &Pool,
    user: &User,
    code: &str,
    version: &str,
    name: &str,
) -> Result<Listed, DatasetError> {
    let (dataset, v) = catalog::version(pool, user, code, version).await?;
    let row: Option<(FileView, bool, i64)> = sqlx::query_as::<_, FileRow>(
        "SELECT f.name, f.size, f.sha256, u.username AS uploaded_by, f.uploaded_at, f.placing, f.placings
           FROM dataset_files f JOIN users u ON u.id = f.uploaded_by WHERE f.version_id = ? AND f.name = ?",
    )
    .bind(v.id)
    .bind(name)
    .fetch_optional(pool)
    .await?
    .map(|r| {
        (
            FileView {
                name: r.name,
                size: r.size,
                sha256: r.sha256,
                uploaded_by: r.uploaded_by,
                uploaded_at: r.uploaded_at,
            },
            r.placing,
            r.placings,
        )
    });
    let (file, placing, placings) =
        row.ok_or_else(|| DatasetError::NotFound(format!("file {name} in {code}/{version}")))?;
    if placing {
        return Err(being_replaced(&file.name));
    }
    Ok(Listed { dataset, file, version_id: v.id, placings })
}

impl Listed {
    /// Read after the file was opened: whether what was opened is this
    /// listed file — no replace began since [`listed_file`] and none is
    /// placing, the row unchanged. `Ok(false)`: read it all again.
    pub async fn still_listed(&self, pool: &Pool) -> Result<bool, DatasetError> {
        let now: Option<(bool, i64, String, i64)> = sqlx::query_as(
            "SELECT placing, placings, sha256, size FROM dataset_files WHERE version_id = ? AND name = ?",
        )
        .bind(self.version_id)
        .bind(&self.file.name)
        .fetch_optional(pool)
        .await?;
        Ok(now.is_some_and(|(placing, placings, sha, size)| {
            !placing && placings == self.placings && sha == self.file.sha256 && size == self.file.size
        }))
    }
}

/// The refusal of a download while the file is being replaced: brief, so
/// worth trying again (503 with `Retry-After`).
pub fn being_replaced(name: &str) -> DatasetError {
    DatasetError::Replacing(format!("{name} is being replaced right now; try again in a moment"))
}

#[derive(sqlx::FromRow)]
struct FileRow {
    name: String,
    size: i64,
    sha256: String,
    uploaded_by: String,
    uploaded_at: i64,
    placing: bool,
    placings: i64,
}
