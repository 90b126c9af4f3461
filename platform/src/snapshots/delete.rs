//! Deleting a snapshot: its image is removed from its node's engine first,
//! and the row only once the engine agreed, so a refusal (the engine is
//! unreachable, a container still runs from it) changes nothing.

use crate::{accounts::User, audit, db::Pool, fleet::Fleet, machines::visibility, transitions, PlatformError};

pub async fn delete(pool: &Pool, fleet: &Fleet, who: &User, id: i64) -> Result<String, PlatformError> {
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(String, String, i64, Option<i64>, String)> =
        sqlx::query_as(&format!("SELECT name, image_ref, owner_id, node_id, state FROM snapshots WHERE id = ? AND ({cond})"))
            .bind(id)
            .bind(bind)
            .fetch_optional(pool)
            .await?;
    let (name, reference, owner, node_id, state) = row.ok_or_else(|| PlatformError::NotFound("snapshot".into()))?;
    if owner != who.id && !who.role.is_admin() {
        return Err(PlatformError::Conflict("only the snapshot's owner, or an admin, can delete it".into()));
    }
    if state == "creating" {
        return Err(PlatformError::Conflict(format!("snapshot {name} is still being taken; wait for it to finish")));
    }
    // A reclaimed machine comes back from it, and a restore under way has
    // no container using the image yet (the engine would let it go).
    let needed: Option<String> = sqlx::query_scalar(
        "SELECT m.name FROM machines m WHERE m.restore_snapshot_id = ?
           AND (m.state = 'reclaimed' OR EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.kind = 'restore'
                                                 AND t.state IN ('pending', 'scheduled', 'running')))",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    if let Some(machine) = needed {
        return Err(PlatformError::Conflict(format!("machine {machine} is restored from snapshot {name}; restore or delete the machine first")));
    }
    if let Some(node_id) = node_id {
        let exec = fleet.executor(pool, node_id).await?;
        exec.remove_image(&reference).await.map_err(|e| PlatformError::Conflict(format!("snapshot {name} was not deleted: {e}")))?;
    }
    let mut tx = transitions::begin(pool).await?;
    sqlx::query("UPDATE machines SET from_snapshot_id = NULL WHERE from_snapshot_id = ?").bind(id).execute(&mut *tx).await?;
    sqlx::query("UPDATE machines SET restore_snapshot_id = NULL WHERE restore_snapshot_id = ?").bind(id).execute(&mut *tx).await?;
    sqlx::query("DELETE FROM snapshots WHERE id = ?").bind(id).execute(&mut *tx).await?;
    audit::record(&mut *tx, Some(who.id), "snapshot.delete", &format!("snapshot {name} deleted (image {reference} removed)")).await?;
    tx.commit().await?;
    Ok(name)
}
