//! Kept volumes: data volumes whose machine was deleted with "keep the data
//! volume". Listed for their owner (and admins), attachable to a new
//! machine on their node (see admission), and deletable — the collector
//! then removes the Docker volume and its block device from the node. Not
//! for the rest of the group: a volume holds its owner's data, which group
//! members may not enter (as with the terminal and files of a machine).
use crate::{accounts::User, audit, db::Pool, transitions, PlatformError};
use serde::{Deserialize, Serialize};

/// A data volume kept when its machine was deleted; a new machine can be
/// created on it (on its node), or it can be deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct KeptVolumeView {
    pub id: i64,
    pub name: String,
    pub node: String,
    pub owner: String,
    pub size_gb: i64,
    /// Whether the size is a hard limit (a block device) on its node.
    pub enforced: bool,
    pub from_machine: String,
    /// Unix seconds.
    pub kept_at: i64,
}

impl KeptVolumeView {
    /// "kept volume gantry-x-m4-data (10 GB, node gpu-2)".
    pub fn label(&self) -> String {
        format!("kept volume {} ({} GB, node {})", self.name, self.size_gb, self.node)
    }
}

/// The SQL condition (and its one bound value) for the kept volumes `who`
/// may see and use: their own, or every one for an admin.
fn owned(who: &User, owner_column: &str) -> (String, i64) {
    if who.role.is_admin() {
        ("1 = 1 OR ? IS NULL".to_string(), 0)
    } else {
        (format!("{owner_column} = ?"), who.id)
    }
}

pub async fn list_kept_volumes(pool: &Pool, viewer: &User) -> Result<Vec<KeptVolumeView>, PlatformError> {
    let (cond, bind) = owned(viewer, "k.owner_id");
    Ok(sqlx::query_as(&format!(
        "SELECT k.id, k.name, n.name AS node, u.username AS owner, k.size_gb, k.enforced, k.from_machine, k.kept_at
         FROM kept_volumes k JOIN nodes n ON n.id = k.node_id JOIN users u ON u.id = k.owner_id
         WHERE ({cond}) ORDER BY k.id DESC"
    ))
    .bind(bind)
    .fetch_all(pool)
    .await?)
}

/// Forgets the kept volume; the collector deletes it from its node (at once
/// if the engine answers, else when it does).
pub async fn delete_kept_volume(pool: &Pool, who: &User, id: i64) -> Result<String, PlatformError> {
    let mut tx = transitions::begin(pool).await?;
    let (cond, bind) = owned(who, "owner_id");
    let name: String = sqlx::query_scalar(&format!("SELECT name FROM kept_volumes WHERE id = ? AND ({cond})"))
        .bind(id)
        .bind(bind)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| PlatformError::NotFound("volume".into()))?;
    sqlx::query("DELETE FROM kept_volumes WHERE id = ?").bind(id).execute(&mut *tx).await?;
    audit::record(&mut *tx, Some(who.id), "volume.delete", &format!("kept volume {name} deleted")).await?;
    tx.commit().await?;
    Ok(name)
}
