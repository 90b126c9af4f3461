//! A version's uploads in progress, for the people who may cancel them.
//! An upload whose client went away (a tab closed, a row that gave up, a
//! script that died) keeps its name, its quota reservation and the
//! version's Seal blocked until it expires; listing it with what it holds
//! and who started it is what lets a member of the group end it (Cancel:
//! [`super::cancel_upload`]) instead of waiting days.

use super::{begin::held, catalog, DatasetError, Datasets};
use crate::{accounts::User, db::Pool, now};
use futures_util::{stream, StreamExt};
use serde::{Deserialize, Serialize};

const STORES_ASKED_AT_ONCE: usize = 8;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UploadInProgress {
    pub name: String,
    /// Bytes both stores hold; `None` when the stores could not be asked.
    pub held: Option<u64>,
    /// The declared length; `None` for a one-request upload of unknown length.
    pub total: Option<u64>,
    pub started_by: String,
    pub started_at: i64,
    /// The last request that wrote, asked for or held it.
    pub touched_at: i64,
    /// A request holds it now (its writer's lease has not lapsed): Cancel
    /// is refused until that request ends.
    pub receiving: bool,
    /// It can be continued by choosing the same file again.
    pub resumable: bool,
    /// It would replace the listed file of that name.
    pub replace: bool,
}

#[derive(sqlx::FromRow)]
struct Row {
    name: String,
    temp_key: String,
    total_size: Option<i64>,
    started_by: String,
    created_at: i64,
    touched_at: i64,
    writer_expires: i64,
    has_writer: bool,
    resumable: bool,
    replace: bool,
}

/// The uploads in progress of a version, by name. Only its writers (the
/// owning group, admins) see them: another group's private dataset is
/// "not found", a public one's uploads are not its readers' business.
pub async fn uploads_in_progress(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    code: &str,
    version: &str,
) -> Result<Vec<UploadInProgress>, DatasetError> {
    let (d, v) = catalog::version(pool, user, code, version).await?;
    catalog::may_write(user, &d)?;
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT up.name, up.temp_key, up.total_size, u.username AS started_by, up.created_at, up.touched_at,
                up.writer_expires, up.writer IS NOT NULL AS has_writer, up.resumable, up.replace
           FROM dataset_uploads up JOIN users u ON u.id = up.user_id WHERE up.version_id = ? ORDER BY up.name",
    )
    .bind(v.id)
    .fetch_all(pool)
    .await?;
    // Unconfigured stores leave the figures unknown, not the list.
    let both = catalog::stores_of(stores, &d).ok();
    let at = now();
    let asked = rows.into_iter().map(|r| {
        let both = both.clone();
        async move {
            // A store that cannot answer leaves that figure unknown: the
            // Cancel offered beside it does not depend on it.
            let held = match &both {
                Some(both) => held(both, &r.temp_key).await.ok(),
                None => None,
            };
            UploadInProgress {
                name: r.name,
                held,
                total: r.total_size.map(|t| t.max(0) as u64),
                started_by: r.started_by,
                started_at: r.created_at,
                touched_at: r.touched_at,
                receiving: r.has_writer && r.writer_expires > at,
                resumable: r.resumable,
                replace: r.replace,
            }
        }
    });
    // A few stores asked at once: a script's hundreds of uploads must not
    // make the page wait for each in turn, nor ask all at once.
    let out = stream::iter(asked).buffered(STORES_ASKED_AT_ONCE).collect().await;
    Ok(out)
}
