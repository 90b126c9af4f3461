//! Every group's dataset storage for the admin console: bytes held by
//! listed files, bytes reserved by uploads in progress, and the quota
//! (the group's own, or the server's default).

use super::DatasetError;
use crate::db::Pool;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStorage {
    pub group: String,
    pub used_bytes: u64,
    pub reserved_bytes: u64,
    pub quota_bytes: u64,
    /// The quota is the group's own setting (not the server default).
    pub own_quota: bool,
}

pub async fn overview(pool: &Pool, default_quota: u64) -> Result<Vec<GroupStorage>, DatasetError> {
    // Reserved as the quota check counts it: a replace only what it adds.
    let rows: Vec<(String, i64, i64, Option<i64>)> = sqlx::query_as(&format!(
        "SELECT g.name,
           (SELECT COALESCE(SUM(f.size), 0) FROM dataset_files f JOIN dataset_versions v ON v.id = f.version_id
              JOIN datasets d ON d.id = v.dataset_id WHERE d.group_id = g.id),
           (SELECT COALESCE(SUM({}), 0) FROM dataset_uploads up JOIN dataset_versions v ON v.id = up.version_id
              JOIN datasets d ON d.id = v.dataset_id WHERE d.group_id = g.id),
           q.max_bytes
         FROM groups g LEFT JOIN dataset_quotas q ON q.group_id = g.id ORDER BY g.name",
        super::catalog::UPLOAD_RESERVATION
    ))
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(group, used, reserved, own)| GroupStorage {
            group,
            used_bytes: used.max(0) as u64,
            reserved_bytes: reserved.max(0) as u64,
            quota_bytes: own.map(|b| b.max(0) as u64).unwrap_or(default_quota),
            own_quota: own.is_some(),
        })
        .collect())
}
