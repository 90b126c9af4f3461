//! Deleting a snapshot: its image is removed from its node's engine first,
//! and the row only once the engine agreed, so a refusal (the engine is
//! unreachable, a container still runs from it) changes nothing.
//!
//! The engine only knows about containers that exist: a machine admitted
//! from the snapshot, or queued to be reinstalled or restored from it, has
//! none yet, and its next container is made from the image. So the delete
//! is refused while any machine that can still run needs the image, and
//! that check and the mark that keeps new users away (the snapshot is no
//! longer `ready` — see [`DELETING`]) are one transaction, before the
//! engine is asked.

use crate::{accounts::User, audit, db::Pool, fleet::Fleet, machines::visibility, transitions, PlatformError};
use gantry_core::{alloc::NodeState, snapshot::SnapshotState};

/// The message of a snapshot whose image is being removed. Its state is
/// `failed` meanwhile (the schema has no `deleting`), so nothing starts
/// using it; an engine refusal puts the state it had back.
pub(crate) const DELETING: &str = "being deleted";

/// Runs on a task of its own: a request cut off part-way (the client hung
/// up) must not leave the snapshot marked for good — out of use, yet
/// counted against the group's snapshot quota.
pub async fn delete(pool: &Pool, fleet: &Fleet, who: &User, id: i64) -> Result<String, PlatformError> {
    let (pool, fleet, who) = (pool.clone(), fleet.clone(), who.clone());
    tokio::spawn(async move { delete_now(&pool, &fleet, &who, id).await })
        .await
        .map_err(|e| PlatformError::Internal(format!("deleting a snapshot: {e}")))?
}

async fn delete_now(pool: &Pool, fleet: &Fleet, who: &User, id: i64) -> Result<String, PlatformError> {
    let mut tx = transitions::begin(pool).await?;
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(String, String, i64, Option<i64>, String, String)> = sqlx::query_as(&format!(
        "SELECT name, image_ref, owner_id, node_id, state, message FROM snapshots WHERE id = ? AND ({cond})"
    ))
    .bind(id)
    .bind(bind)
    .fetch_optional(&mut *tx)
    .await?;
    let (name, reference, owner, node_id, state, message) =
        row.ok_or_else(|| PlatformError::NotFound("snapshot".into()))?;
    let state = state.parse::<SnapshotState>()?;
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict("only the snapshot's owner, or an admin, can delete it".into()));
    }
    if state == SnapshotState::Creating {
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
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(machine) = needed {
        return Err(PlatformError::Conflict(format!(
            "machine {machine} is restored from snapshot {name}; restore or delete the machine first"
        )));
    }
    let users = image_users(&mut tx, id, &reference).await?;
    if !users.is_empty() {
        return Err(PlatformError::Conflict(format!(
            "snapshot {name} is the image of {}: a container is, or will be, made from it; delete the machine(s) or reinstall them from another image first",
            users.iter().map(|m| format!("machine {m}")).collect::<Vec<_>>().join(", ")
        )));
    }
    mark(&mut tx, id).await?;
    tx.commit().await?;
    let marked = Marked { id, name, reference, node_id, state, message };
    match remove_marked(pool, fleet, &marked, Some(who.id), "snapshot.delete", "deleted").await {
        Ok(()) => Ok(marked.name),
        // The engine's refusal, or a node address the client cannot use:
        // the text names the endpoint (an address inside the cluster) or
        // host paths, so the log has it and the user a plain reason.
        Err(e @ (PlatformError::Conflict(_) | PlatformError::BadRequest(_))) => {
            tracing::warn!(snapshot = id, error = %e, "a snapshot's image was not removed from its node");
            Err(PlatformError::Conflict(format!(
                "snapshot {} was not deleted: its node's engine did not remove the image, so nothing changed; try again later (the error has been logged)",
                marked.name
            )))
        }
        Err(e) => Err(e),
    }
}

/// A snapshot whose [`DELETING`] mark is committed, with what it was before.
pub(super) struct Marked {
    pub id: i64,
    pub name: String,
    pub reference: String,
    pub node_id: Option<i64>,
    pub state: SnapshotState,
    pub message: String,
}

/// Keeps new users away (in the transaction that found it unneeded).
pub(super) async fn mark(conn: &mut sqlx::SqliteConnection, id: i64) -> Result<(), PlatformError> {
    sqlx::query("UPDATE snapshots SET state = 'failed', message = ? WHERE id = ?")
        .bind(DELETING)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The engine's part, then the row: the image is removed from its node
/// (none to remove when the node was removed, none asked of a lost one);
/// a refusal puts the state it
/// had back and is returned with the engine's own text (for the log and
/// the collector's report, not for a user). `by` and `kind` are for the
/// audit entry.
pub(super) async fn remove_marked(
    pool: &Pool,
    fleet: &Fleet,
    s: &Marked,
    by: Option<i64>,
    kind: &str,
    why: &str,
) -> Result<(), PlatformError> {
    // A lost node is gone for good (one repaired is added anew): its engine
    // will never answer, and asking it would leave the snapshot counted
    // against the quota, undeletable, and tried again at every sweep.
    let lost = match s.node_id {
        Some(node_id) => sqlx::query_scalar::<_, String>("SELECT state FROM nodes WHERE id = ?")
            .bind(node_id)
            .fetch_optional(pool)
            .await?
            .is_some_and(|state| state.parse() == Ok(NodeState::Lost)),
        None => false,
    };
    let image = if lost {
        format!("image {} left on its lost node", s.reference)
    } else {
        format!("image {} removed", s.reference)
    };
    if let Some(node_id) = s.node_id.filter(|_| !lost) {
        let removed = match fleet.executor(pool, node_id).await {
            Ok(exec) => exec
                .remove_image(&s.reference)
                .await
                .map_err(|e| PlatformError::Conflict(format!("snapshot {} was not deleted: {e}", s.name))),
            Err(e) => Err(e),
        };
        if let Err(e) = removed {
            sqlx::query("UPDATE snapshots SET state = ?, message = ? WHERE id = ? AND message = ?")
                .bind(s.state.as_str())
                .bind(&s.message)
                .bind(s.id)
                .bind(DELETING)
                .execute(pool)
                .await?;
            return Err(e);
        }
    }
    let mut tx = transitions::begin(pool).await?;
    sqlx::query("UPDATE machines SET from_snapshot_id = NULL WHERE from_snapshot_id = ?")
        .bind(s.id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE machines SET restore_snapshot_id = NULL WHERE restore_snapshot_id = ?")
        .bind(s.id)
        .execute(&mut *tx)
        .await?;
    // Two deletes of one snapshot may race (a user's and the sweep's): the
    // second finds no row and records nothing.
    if sqlx::query("DELETE FROM snapshots WHERE id = ?").bind(s.id).execute(&mut *tx).await?.rows_affected() == 1 {
        audit::record(&mut *tx, by, kind, &format!("snapshot {} {why} ({image})", s.name)).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Machines that may still run and whose next container is made from the
/// snapshot's image: admitted from it, reinstalled (or queued to be) from
/// it, restored from it. A queued reinstall names the snapshot in its
/// task's payload only: the machine takes the image when it begins. A
/// reclaimed machine's image is replaced by its restore snapshot's, so it
/// is not one (its restore snapshot is checked above); a failed one is, as
/// long as it is not deleted.
pub(super) async fn image_users(
    conn: &mut sqlx::SqliteConnection,
    id: i64,
    reference: &str,
) -> Result<Vec<String>, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT m.name FROM machines m
         WHERE m.state NOT IN ('deleted', 'lost', 'reclaimed')
           AND (m.image_id = (SELECT i.id FROM images i WHERE i.name = 'snapshot:' || ?2)
                OR (m.from_snapshot_id = ?1 AND EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.kind IN ('create', 'reinstall', 'restore')
                                                          AND t.state IN ('pending', 'scheduled', 'running')))
                OR EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.kind = 'reinstall' AND t.state IN ('pending', 'scheduled', 'running')
                                                   AND json_extract(t.payload, '$.from_snapshot_id') = ?1))
         ORDER BY m.name LIMIT 5",
    )
    .bind(id)
    .bind(reference)
    .fetch_all(&mut *conn)
    .await?)
}
