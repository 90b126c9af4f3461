//! A group's disk limits: how much one machine may write outside /data
//! (`groups.root_disk_mb`) and how much its snapshots may take together
//! (`groups.snapshot_disk_mb`), both in MB, 0 for no limit. Saved with the
//! rest of the group's policy, in its transaction and audit row
//! (`policy::update_group_policy_with_disk`).

use crate::PlatformError;
use gantry_core::disk::{format_limit_mb, LIMIT_MB_MAX};

/// The limits an edit sets; `None` leaves one as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskLimits {
    pub root_disk_mb: Option<i64>,
    pub snapshot_disk_mb: Option<i64>,
}

impl DiskLimits {
    /// Refuses a value out of range before anything is written.
    pub fn check(&self) -> Result<(), PlatformError> {
        for (label, v) in
            [("root filesystem per machine", self.root_disk_mb), ("snapshot storage", self.snapshot_disk_mb)]
        {
            if let Some(mb) = v.filter(|mb| !(0..=LIMIT_MB_MAX).contains(mb)) {
                return Err(PlatformError::BadRequest(format!(
                    "{label}: {mb} MB is out of range (0 = no limit, at most {} GB)",
                    LIMIT_MB_MAX / 1000
                )));
            }
        }
        Ok(())
    }
}

/// Writes the limits given inside the caller's transaction; the words for
/// the audit row when something changed. Lowering one takes nothing away:
/// machines over it are warned and stopped by the disk watcher, and new
/// snapshots are refused.
pub(crate) async fn apply(
    tx: &mut sqlx::SqliteConnection,
    group_id: i64,
    limits: &DiskLimits,
) -> Result<Vec<String>, PlatformError> {
    limits.check()?;
    let (old_root, old_snap): (i64, i64) =
        sqlx::query_as("SELECT root_disk_mb, snapshot_disk_mb FROM groups WHERE id = ?")
            .bind(group_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| PlatformError::NotFound("group".into()))?;
    let (root, snap) = (limits.root_disk_mb.unwrap_or(old_root), limits.snapshot_disk_mb.unwrap_or(old_snap));
    sqlx::query("UPDATE groups SET root_disk_mb = ?, snapshot_disk_mb = ? WHERE id = ?")
        .bind(root)
        .bind(snap)
        .bind(group_id)
        .execute(&mut *tx)
        .await?;
    let mut words = Vec::new();
    if root != old_root {
        words.push(format!("root filesystem per machine {} → {}", format_limit_mb(old_root), format_limit_mb(root)));
    }
    if snap != old_snap {
        words.push(format!("snapshot storage {} → {}", format_limit_mb(old_snap), format_limit_mb(snap)));
    }
    Ok(words)
}

/// (root filesystem MB per machine, snapshot storage MB) of a group.
pub async fn of_group(db: impl sqlx::SqliteExecutor<'_>, group_id: i64) -> Result<(i64, i64), PlatformError> {
    Ok(sqlx::query_as("SELECT root_disk_mb, snapshot_disk_mb FROM groups WHERE id = ?")
        .bind(group_id)
        .fetch_one(db)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_limits_are_refused() {
        assert!(DiskLimits { root_disk_mb: Some(-1), snapshot_disk_mb: None }.check().is_err());
        assert!(DiskLimits { root_disk_mb: None, snapshot_disk_mb: Some(LIMIT_MB_MAX + 1) }.check().is_err());
        assert!(DiskLimits { root_disk_mb: Some(0), snapshot_disk_mb: Some(LIMIT_MB_MAX) }.check().is_ok());
        assert!(DiskLimits::default().check().is_ok());
    }
}
