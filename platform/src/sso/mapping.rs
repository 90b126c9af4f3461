//! The admin's mappings of directory groups to Gantry groups and roles
//! (table `sso_group_mappings`, migration 0044). The decision itself is
//! `gantry_core::sso_mapping::decide`; this reads and edits the table.

use crate::{audit, db::Pool, error::is_unique_violation, now, PlatformError};
use gantry_core::{sso_mapping, Role};
use serde::{Deserialize, Serialize};

/// A mapping as the Admin → Sign-in page lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingRow {
    pub id: i64,
    pub directory_group: String,
    pub gantry_group: String,
    pub role: Role,
    pub priority: i64,
}

impl From<MappingRow> for sso_mapping::Mapping {
    fn from(r: MappingRow) -> Self {
        sso_mapping::Mapping {
            id: r.id,
            directory_group: r.directory_group,
            gantry_group: r.gantry_group,
            role: r.role,
            priority: r.priority,
        }
    }
}

/// Every mapping, in the order that decides between them (lowest priority
/// first, then the first added).
pub async fn list_mappings(pool: &Pool) -> Result<Vec<MappingRow>, PlatformError> {
    let rows: Vec<(i64, String, String, String, i64)> = sqlx::query_as(
        "SELECT m.id, m.directory_group, g.name, m.role, m.priority
         FROM sso_group_mappings m JOIN groups g ON g.id = m.group_id
         ORDER BY m.priority, m.id",
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(id, directory_group, gantry_group, role, priority)| {
            Ok(MappingRow { id, directory_group, gantry_group, role: role.parse()?, priority })
        })
        .collect()
}

/// Adds a mapping; refused (nothing written) for an empty or overlong
/// directory group, an unknown Gantry group, a priority outside 0..=10000,
/// or a directory group that already has a mapping.
pub async fn add_mapping(
    pool: &Pool,
    actor: i64,
    directory_group: &str,
    gantry_group: &str,
    role: Role,
    priority: i64,
) -> Result<MappingRow, PlatformError> {
    let directory_group = sso_mapping::check_directory_group(directory_group).map_err(PlatformError::BadRequest)?;
    gantry_core::validate::in_range("priority", priority, 0, 10_000)?;
    let mut tx = crate::transitions::begin(pool).await?;
    let gid: Option<(i64,)> =
        sqlx::query_as("SELECT id FROM groups WHERE name = ?").bind(gantry_group).fetch_optional(&mut *tx).await?;
    let (gid,) = gid.ok_or_else(|| {
        PlatformError::NotFound(format!("group \"{}\"", gantry_group.chars().take(40).collect::<String>()))
    })?;
    let id = sqlx::query(
        "INSERT INTO sso_group_mappings (directory_group, group_id, role, priority, created_at) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(&directory_group)
    .bind(gid)
    .bind(role.as_str())
    .bind(priority)
    .bind(now())
    .execute(&mut *tx)
    .await
    .map_err(|e| {
        if is_unique_violation(&e) {
            PlatformError::Conflict(format!("the directory group \"{directory_group}\" is already mapped"))
        } else {
            e.into()
        }
    })?
    .last_insert_rowid();
    let detail = format!("directory group {directory_group} → group {gantry_group} as {role}, priority {priority}");
    audit::record(&mut *tx, Some(actor), "sso.mapping_add", &detail).await?;
    tx.commit().await?;
    Ok(MappingRow { id, directory_group, gantry_group: gantry_group.to_string(), role, priority })
}

/// Removes a mapping. Its members keep their accounts until their next
/// sign-in, which applies the mappings left.
pub async fn remove_mapping(pool: &Pool, actor: i64, id: i64) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    let row: Option<(String,)> = sqlx::query_as("SELECT directory_group FROM sso_group_mappings WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    let (dir,) = row.ok_or_else(|| PlatformError::NotFound("mapping".into()))?;
    sqlx::query("DELETE FROM sso_group_mappings WHERE id = ?").bind(id).execute(&mut *tx).await?;
    audit::record(&mut *tx, Some(actor), "sso.mapping_remove", &format!("directory group {dir}")).await?;
    tx.commit().await?;
    Ok(())
}
