//! What a machine's page says of its own filesystem: the disk watcher's
//! last reading against its group's limit.

use crate::{accounts::User, db::Pool, machines::visibility, PlatformError};
use serde::{Deserialize, Serialize};

/// A machine's writable layer as last measured, and its group's limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct DiskUsage {
    /// Bytes outside /data at the last reading; `None`: not measured yet.
    pub used_bytes: Option<i64>,
    /// When (unix seconds).
    pub measured_at: Option<i64>,
    /// The group's limit per machine in MB; 0: none.
    pub limit_mb: i64,
    /// Its owner has been warned and it has not gone back under since.
    pub warned: bool,
}

impl DiskUsage {
    /// "19.0 MB of its 20 MB limit (95 %)", or what is known.
    pub fn summary(&self) -> String {
        use gantry_core::disk::{format_bytes, format_limit_mb, MB};
        match (self.used_bytes, self.limit_mb) {
            (None, 0) => "not measured; no limit".to_string(),
            (None, limit) => format!("not measured yet; its limit is {}", format_limit_mb(limit)),
            (Some(used), 0) => format!("{} (no limit)", format_bytes(used)),
            (Some(used), limit) => format!(
                "{} of its {} limit ({} %)",
                format_bytes(used),
                format_limit_mb(limit),
                used.saturating_mul(100) / limit.saturating_mul(MB).max(1)
            ),
        }
    }
}

/// Machine `machine_id`'s usage, if the viewer may see the machine.
pub async fn of_machine(pool: &Pool, viewer: &User, machine_id: i64) -> Result<DiskUsage, PlatformError> {
    let (cond, bind) = visibility(viewer, "m.group_id");
    sqlx::query_as(&format!(
        "SELECT m.root_disk_bytes AS used_bytes, m.root_disk_at AS measured_at, g.root_disk_mb AS limit_mb,
                m.root_disk_warned <> 0 AS warned
         FROM machines m JOIN groups g ON g.id = m.group_id WHERE m.id = ? AND ({cond})"
    ))
    .bind(machine_id)
    .bind(bind)
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| PlatformError::NotFound("machine".into()))
}

#[cfg(test)]
mod tests {
    use super::DiskUsage;

    #[test]
    fn summaries_say_what_is_known() {
        let u = |used, limit_mb| DiskUsage { used_bytes: used, measured_at: None, limit_mb, warned: false };
        assert_eq!(u(Some(19_000_000), 20).summary(), "19.0 MB of its 20 MB limit (95 %)");
        assert_eq!(u(None, 50_000).summary(), "not measured yet; its limit is 50 GB");
        assert_eq!(u(Some(12), 0).summary(), "12 bytes (no limit)");
    }
}
