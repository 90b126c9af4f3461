//! Dataset definitions, versions and the file list, with the visibility
//! rule applied in every query: another group's private dataset is "not
//! found", exactly as if it did not exist.

use super::{store::Store, DatasetError, Datasets};
use crate::{accounts::User, audit, db::Pool, error::is_unique_violation, now};
use gantry_core::datasets::{self as rules, Visibility};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct DatasetView {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub region: String,
    pub region_name: String,
    pub category: String,
    pub description: String,
    #[sqlx(try_from = "String")]
    pub visibility: Visibility,
    pub group_id: i64,
    pub group_name: String,
    pub created_by: String,
    pub created_at: i64,
    pub versions: i64,
    pub bytes: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct VersionView {
    pub id: i64,
    pub name: String,
    pub sealed_at: Option<i64>,
    pub created_by: String,
    pub created_at: i64,
    pub files: i64,
    pub bytes: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct FileView {
    pub name: String,
    pub size: i64,
    pub sha256: String,
    pub uploaded_by: String,
    pub uploaded_at: i64,
}

pub struct NewDataset<'a> {
    pub code: &'a str,
    pub name: &'a str,
    pub region: &'a str,
    pub category: &'a str,
    pub description: &'a str,
    pub visibility: &'a str,
}

#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Matches code, name or description.
    pub q: Option<String>,
    pub region: Option<String>,
    pub category: Option<String>,
}

const DATASET_SELECT: &str = "SELECT d.id, d.code, d.name, r.code AS region, r.name AS region_name, d.category, d.description,
    d.visibility, d.group_id, g.name AS group_name, u.username AS created_by, d.created_at,
    (SELECT COUNT(*) FROM dataset_versions v WHERE v.dataset_id = d.id) AS versions,
    (SELECT COALESCE(SUM(f.size), 0) FROM dataset_files f JOIN dataset_versions v ON v.id = f.version_id WHERE v.dataset_id = d.id) AS bytes
  FROM datasets d JOIN regions r ON r.id = d.region_id JOIN groups g ON g.id = d.group_id JOIN users u ON u.id = d.created_by";

/// `?1`: the viewer's group, `?2`: 1 for an admin.
const VISIBLE: &str = "(d.visibility = 'public' OR d.group_id = ?1 OR ?2 = 1)";

fn text(field: &str, value: &str, min: usize, max: usize) -> Result<String, DatasetError> {
    let v = value.trim();
    let n = v.chars().count();
    if n < min || n > max || v.chars().any(|c| c.is_control() && c != '\n' && c != '\r') {
        return Err(DatasetError::BadRequest(format!("{field} must be {min} to {max} printable characters")));
    }
    Ok(v.to_string())
}

pub async fn create_dataset(pool: &Pool, user: &User, new: &NewDataset<'_>) -> Result<DatasetView, DatasetError> {
    let code = new.code.trim();
    rules::code(code)?;
    let name = text("the name", new.name, 1, 120)?;
    rules::category(new.category)?;
    let visibility = Visibility::parse(new.visibility)?;
    let description = text("the description", new.description, 0, 2000)?;
    let region: Option<i64> =
        sqlx::query_scalar("SELECT id FROM regions WHERE code = ?").bind(new.region).fetch_optional(pool).await?;
    let region = region.ok_or_else(|| DatasetError::BadRequest(format!("unknown region \"{}\"", new.region)))?;
    let mut tx = pool.begin().await?;
    let inserted = sqlx::query(
        "INSERT INTO datasets (code, name, region_id, category, description, visibility, group_id, created_by, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(code)
    .bind(&name)
    .bind(region)
    .bind(new.category)
    .bind(&description)
    .bind(visibility.as_str())
    .bind(user.group_id)
    .bind(user.id)
    .bind(now())
    .execute(&mut *tx)
    .await;
    match inserted {
        Err(e) if is_unique_violation(&e) => {
            return Err(DatasetError::Conflict(format!("a dataset with the code {code} already exists")))
        }
        other => other?,
    };
    audit::record(
        &mut *tx,
        Some(user.id),
        "dataset.create",
        &format!("dataset {code} ({}, region {})", visibility.as_str(), new.region),
    )
    .await?;
    tx.commit().await?;
    dataset(pool, user, code).await
}

/// Longest search text, in characters.
const SEARCH_MAX: usize = 200;

pub async fn list_datasets(pool: &Pool, user: &User, filter: &Filter) -> Result<Vec<DatasetView>, DatasetError> {
    let sql = format!(
        "{DATASET_SELECT} WHERE {VISIBLE}
           AND (?3 = '' OR d.code LIKE ?3 ESCAPE '\\' OR d.name LIKE ?3 ESCAPE '\\' OR d.description LIKE ?3 ESCAPE '\\')
           AND (?4 = '' OR r.code = ?4) AND (?5 = '' OR d.category = ?5)
         ORDER BY d.code LIMIT 500"
    );
    let q = filter.q.as_deref().map(str::trim).unwrap_or("");
    // SQLite refuses a LIKE pattern over 50,000 bytes; nobody searches with more than a line.
    if q.chars().count() > SEARCH_MAX {
        return Err(DatasetError::BadRequest(format!("the search text is longer than {SEARCH_MAX} characters")));
    }
    let pattern = if q.is_empty() {
        String::new()
    } else {
        format!("%{}%", q.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"))
    };
    Ok(sqlx::query_as(&sql)
        .bind(user.group_id)
        .bind(user.role.is_admin() as i64)
        .bind(pattern)
        .bind(filter.region.as_deref().unwrap_or(""))
        .bind(filter.category.as_deref().unwrap_or(""))
        .fetch_all(pool)
        .await?)
}

/// A dataset the user may see, or "not found".
pub async fn dataset(pool: &Pool, user: &User, code: &str) -> Result<DatasetView, DatasetError> {
    let sql = format!("{DATASET_SELECT} WHERE {VISIBLE} AND d.code = ?3");
    let found: Option<DatasetView> = sqlx::query_as(&sql)
        .bind(user.group_id)
        .bind(user.role.is_admin() as i64)
        .bind(code)
        .fetch_optional(pool)
        .await?;
    found.ok_or_else(|| DatasetError::NotFound(format!("dataset {code}")))
}

/// Writing (versions, uploads, seal, delete) is for the owning group and admins.
pub fn may_write(user: &User, d: &DatasetView) -> Result<(), DatasetError> {
    if user.role.is_admin() || user.group_id == d.group_id {
        Ok(())
    } else {
        Err(DatasetError::Forbidden(format!(
            "dataset {} belongs to group {}; only its members may change it",
            d.code, d.group_name
        )))
    }
}

const VERSION_SELECT: &str = "SELECT v.id, v.name, v.sealed_at, u.username AS created_by, v.created_at,
    (SELECT COUNT(*) FROM dataset_files f WHERE f.version_id = v.id) AS files,
    (SELECT COALESCE(SUM(f.size), 0) FROM dataset_files f WHERE f.version_id = v.id) AS bytes
  FROM dataset_versions v JOIN users u ON u.id = v.created_by";

pub async fn versions(pool: &Pool, user: &User, code: &str) -> Result<(DatasetView, Vec<VersionView>), DatasetError> {
    let d = dataset(pool, user, code).await?;
    let sql = format!("{VERSION_SELECT} WHERE v.dataset_id = ? ORDER BY v.created_at DESC, v.id DESC");
    let list = sqlx::query_as(&sql).bind(d.id).fetch_all(pool).await?;
    Ok((d, list))
}

pub async fn version(
    pool: &Pool,
    user: &User,
    code: &str,
    name: &str,
) -> Result<(DatasetView, VersionView), DatasetError> {
    let d = dataset(pool, user, code).await?;
    let sql = format!("{VERSION_SELECT} WHERE v.dataset_id = ? AND v.name = ?");
    let v: Option<VersionView> = sqlx::query_as(&sql).bind(d.id).bind(name).fetch_optional(pool).await?;
    let v = v.ok_or_else(|| DatasetError::NotFound(format!("version {name} of dataset {code}")))?;
    Ok((d, v))
}

pub async fn create_version(pool: &Pool, user: &User, code: &str, name: &str) -> Result<VersionView, DatasetError> {
    let name = name.trim();
    rules::version(name)?;
    let d = dataset(pool, user, code).await?;
    may_write(user, &d)?;
    // Under the write lock: a version deleted just before records its
    // purge in the transaction that frees the name.
    let mut tx = crate::db::begin_immediate(pool).await?;
    super::purge::refuse_while_pending(&mut tx, &d.code, name).await?;
    let inserted =
        sqlx::query("INSERT INTO dataset_versions (dataset_id, name, created_by, created_at) VALUES (?, ?, ?, ?)")
            .bind(d.id)
            .bind(name)
            .bind(user.id)
            .bind(now())
            .execute(&mut *tx)
            .await;
    match inserted {
        Err(e) if is_unique_violation(&e) => {
            return Err(DatasetError::Conflict(format!("dataset {code} already has a version {name}")))
        }
        other => other?,
    };
    audit::record(&mut *tx, Some(user.id), "dataset.version.create", &format!("dataset {code} version {name}")).await?;
    tx.commit().await?;
    Ok(version(pool, user, code, name).await?.1)
}

/// A sealed version is read-only for good: what compute tasks mount.
pub async fn seal_version(pool: &Pool, user: &User, code: &str, name: &str) -> Result<(), DatasetError> {
    let (d, v) = version(pool, user, code, name).await?;
    may_write(user, &d)?;
    let mut tx = crate::db::begin_immediate(pool).await?;
    let open: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM dataset_uploads WHERE version_id = ?")
        .bind(v.id)
        .fetch_one(&mut *tx)
        .await?;
    if open > 0 {
        return Err(DatasetError::Conflict(format!(
            "version {name} has {open} upload(s) in progress; finish them, or cancel them under \"Uploads in progress\" on the version's page, before sealing"
        )));
    }
    let sealed = sqlx::query("UPDATE dataset_versions SET sealed_at = ? WHERE id = ? AND sealed_at IS NULL")
        .bind(now())
        .bind(v.id)
        .execute(&mut *tx)
        .await?;
    if sealed.rows_affected() == 0 {
        return Err(DatasetError::Conflict(format!("version {name} is already sealed")));
    }
    audit::record(&mut *tx, Some(user.id), "dataset.version.seal", &format!("dataset {code} version {name} sealed"))
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Removes the version from the list and records that its files (and
/// unfinished uploads) must go from both stores; then removes them on a
/// task of its own (see [`super::purge`]), waiting for it. A store that
/// fails is named in the error; the version is gone from the list either
/// way, and its files are removed later.
pub async fn delete_version(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    code: &str,
    name: &str,
) -> Result<(), DatasetError> {
    let (d, v) = version(pool, user, code, name).await?;
    may_write(user, &d)?;
    // Refused before anything changes when a store is not configured.
    stores_of(stores, &d)?;
    let mut tx = crate::db::begin_immediate(pool).await?;
    // The version read above, still there under the write lock: a delete
    // that waited for the lock behind another delete of it (a double click),
    // while the name was made again, must not purge the new version's files.
    let still: Option<i64> =
        sqlx::query_scalar("SELECT id FROM dataset_versions WHERE id = ?").bind(v.id).fetch_optional(&mut *tx).await?;
    if still.is_none() {
        return Err(DatasetError::NotFound(format!("version {name} of dataset {code}")));
    }
    // An admin sees every group's machines; anyone else only their own.
    let asker = (!user.role.is_admin()).then_some(user.group_id);
    let mounted_by = super::mounts::live_users(&mut tx, v.id, asker).await?;
    if !mounted_by.is_empty() {
        return Err(DatasetError::Conflict(mounted_by.refusal(name)));
    }
    let temps: Vec<String> = sqlx::query_scalar("SELECT temp_key FROM dataset_uploads WHERE version_id = ?")
        .bind(v.id)
        .fetch_all(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM dataset_versions WHERE id = ?").bind(v.id).execute(&mut *tx).await?;
    let purge =
        super::purge::record(&mut tx, d.id, &v.name, &rules::version_prefix(&d.code, &v.name), &d.region, &temps)
            .await?;
    audit::record(
        &mut *tx,
        Some(user.id),
        "dataset.version.delete",
        &format!("dataset {code} version {name} deleted ({} files)", v.files),
    )
    .await?;
    tx.commit().await?;
    // False: a sweep took the purge first and finishes it.
    super::purge::run_detached(pool, stores, purge).await.map(drop)
}

pub async fn files(
    pool: &Pool,
    user: &User,
    code: &str,
    version_name: &str,
) -> Result<(DatasetView, VersionView, Vec<FileView>), DatasetError> {
    let (d, v) = version(pool, user, code, version_name).await?;
    let list = sqlx::query_as(
        "SELECT f.name, f.size, f.sha256, u.username AS uploaded_by, f.uploaded_at
           FROM dataset_files f JOIN users u ON u.id = f.uploaded_by WHERE f.version_id = ? ORDER BY f.name",
    )
    .bind(v.id)
    .fetch_all(pool)
    .await?;
    Ok((d, v, list))
}

pub async fn file(
    pool: &Pool,
    user: &User,
    code: &str,
    version_name: &str,
    name: &str,
) -> Result<(DatasetView, FileView), DatasetError> {
    let (d, v) = version(pool, user, code, version_name).await?;
    let f: Option<FileView> = sqlx::query_as(
        "SELECT f.name, f.size, f.sha256, u.username AS uploaded_by, f.uploaded_at
           FROM dataset_files f JOIN users u ON u.id = f.uploaded_by WHERE f.version_id = ? AND f.name = ?",
    )
    .bind(v.id)
    .bind(name)
    .fetch_optional(pool)
    .await?;
    let f = f.ok_or_else(|| DatasetError::NotFound(format!("file {name} in {code}/{version_name}")))?;
    Ok((d, f))
}

/// The group's byte quota: its own row, else the server's default.
pub async fn quota_bytes(db: impl sqlx::SqliteExecutor<'_>, group_id: i64, default: u64) -> Result<u64, DatasetError> {
    let own: Option<i64> = sqlx::query_scalar("SELECT max_bytes FROM dataset_quotas WHERE group_id = ?")
        .bind(group_id)
        .fetch_optional(db)
        .await?;
    Ok(own.map(|b| b.max(0) as u64).unwrap_or(default))
}

/// An admin sets a group's dataset quota in bytes.
pub async fn set_quota(pool: &Pool, admin: &User, group: &str, bytes: u64) -> Result<(), DatasetError> {
    if !admin.role.is_admin() {
        return Err(DatasetError::Forbidden("only administrators set dataset quotas".into()));
    }
    let bytes = i64::try_from(bytes).map_err(|_| DatasetError::BadRequest("the quota is too large".into()))?;
    let group_id: Option<i64> =
        sqlx::query_scalar("SELECT id FROM groups WHERE name = ?").bind(group).fetch_optional(pool).await?;
    let group_id = group_id.ok_or_else(|| DatasetError::NotFound(format!("group {group}")))?;
    let mut tx = crate::db::begin_immediate(pool).await?;
    let old: Option<i64> = sqlx::query_scalar("SELECT max_bytes FROM dataset_quotas WHERE group_id = ?")
        .bind(group_id)
        .fetch_optional(&mut *tx)
        .await?;
    sqlx::query("INSERT INTO dataset_quotas (group_id, max_bytes) VALUES (?, ?) ON CONFLICT (group_id) DO UPDATE SET max_bytes = excluded.max_bytes")
        .bind(group_id)
        .bind(bytes)
        .execute(&mut *tx)
        .await?;
    let was = old.map_or_else(|| "the default".to_string(), |b| format!("{b} bytes"));
    audit::record(
        &mut *tx,
        Some(admin.id),
        "dataset.quota",
        &format!("group {group} dataset quota {was} → {bytes} bytes"),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// What one upload in progress (`up`, a row of `dataset_uploads`) holds
/// against its group's quota: its length, less the listed file it
/// replaces — that file is counted among the listed ones already, and the
/// upload only ever takes its place.
pub(super) const UPLOAD_RESERVATION: &str = "MAX(0, COALESCE(up.total_size, 0) - CASE WHEN up.replace = 1 THEN
    COALESCE((SELECT f.size FROM dataset_files f WHERE f.version_id = up.version_id AND f.name = up.name), 0) ELSE 0 END)";

/// Bytes a group's listed files hold, and bytes reserved by its uploads in
/// progress (see [`UPLOAD_RESERVATION`]).
pub async fn usage(db: &mut sqlx::SqliteConnection, group_id: i64) -> Result<(u64, u64), DatasetError> {
    let used: i64 = sqlx::query_scalar(
        "SELECT COALESCE(SUM(f.size), 0) FROM dataset_files f JOIN dataset_versions v ON v.id = f.version_id
           JOIN datasets d ON d.id = v.dataset_id WHERE d.group_id = ?",
    )
    .bind(group_id)
    .fetch_one(&mut *db)
    .await?;
    let reserved: i64 = sqlx::query_scalar(&format!(
        "SELECT COALESCE(SUM({UPLOAD_RESERVATION}), 0) FROM dataset_uploads up JOIN dataset_versions v ON v.id = up.version_id
           JOIN datasets d ON d.id = v.dataset_id WHERE d.group_id = ?"
    ))
    .bind(group_id)
    .fetch_one(&mut *db)
    .await?;
    Ok((used.max(0) as u64, reserved.max(0) as u64))
}

/// Both stores of a dataset: the central one first.
pub fn stores_of(stores: &Datasets, d: &DatasetView) -> Result<[std::sync::Arc<dyn Store>; 2], DatasetError> {
    Ok([stores.central()?, stores.region_store(&d.region)?])
}
