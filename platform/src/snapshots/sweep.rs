//! Reclaim snapshots go when their machine no longer needs them. Idle
//! reclaim takes one each time it reclaims a machine; it is that machine's
//! restore point, not one of the group's snapshots (the quota does not
//! count it, and no machine can be made or reinstalled from it). So once
//! its machine is deleted, or a newer reclaim replaced it as the restore
//! point, nothing else would ever remove its row and image.
//!
//! The reconciler runs [`sweep_reclaim`] on each pass rather than the
//! machine delete or the reclaim calling it: a periodic sweep reads what is
//! in the database, so a process that stops between a machine's delete and
//! the image's removal (or part-way through one) leaves nothing behind for
//! good — the next pass finds the snapshot again, marked or not. Each
//! snapshot is deleted as a user's delete does it: the "still needed" check
//! and the mark in one transaction, then the engine, then the row.

use super::delete::{image_users, mark, remove_marked, Marked};
use crate::{db::Pool, fleet::Fleet, transitions, PlatformError};
use std::collections::HashMap;

/// How long one engine may take to remove one image: a black-holed engine
/// must not hold up the reconciler's pass (the snapshot stays marked and
/// the next pass tries again).
const REMOVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// What a sweep did: snapshots deleted, and those the engine refused (or
/// did not answer for) this pass, with why.
#[derive(Debug, Default)]
pub struct Swept {
    pub deleted: Vec<String>,
    pub not_deleted: Vec<String>,
}

/// A reclaim snapshot no machine needs (`s` is the snapshot): not being
/// taken; no machine but a deleted one has it as its restore point (a
/// reclaimed machine comes back from it; a lost one keeps it until it is
/// deleted); and no task is under way on its machine (a reclaim that is
/// taking it, a restore from it). Machines whose image it is are checked
/// with [`image_users`]. A failed one is kept while its machine has lost
/// its container: a reclaim that failed after removing it (its last commit
/// never made) leaves in it the only copy of that machine's files. The
/// sweep runs after the reconciler has looked at the nodes in the same
/// pass, so such a machine usually reads `failed` — but not when its node
/// could not be listed, or its reclaim gave up after the list was taken:
/// [`sweep_reclaim`] therefore also wants the container seen. So: ready
/// (replaced by a newer restore point), marked by a delete a stopped
/// process left, or failed while its machine is deleted, running or
/// stopped.
const UNNEEDED: &str = "s.origin = 'reclaim' AND s.state <> 'creating'
    AND NOT EXISTS (SELECT 1 FROM machines m WHERE m.restore_snapshot_id = s.id AND m.state <> 'deleted')
    AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = s.machine_id AND t.state IN ('pending', 'scheduled', 'running'))
    AND (s.state = 'ready' OR (s.state = 'failed' AND s.message = 'being deleted')
         OR EXISTS (SELECT 1 FROM machines m WHERE m.id = s.machine_id AND m.state IN ('deleted', 'running', 'stopped')))";

/// Deletes every reclaim snapshot no machine needs any more. `seen`: the
/// machines whose recorded container this pass saw on its node, listed
/// after every task of theirs up to the one given had ended. A failed one
/// of a running or stopped machine goes only if its container was seen
/// after its reclaim had failed: a node the pass could not list, or a
/// reclaim that gave up after the list was taken, says nothing about
/// whether the container is still there — and if it is not, the snapshot
/// holds the only copy of the machine's files.
pub async fn sweep_reclaim(pool: &Pool, fleet: &Fleet, seen: &HashMap<i64, i64>) -> Result<Swept, PlatformError> {
    let mut swept = Swept::default();
    let candidates: Vec<(i64, i64, bool, i64)> = sqlx::query_as(&format!(
        "SELECT s.id, s.machine_id,
                s.state = 'failed' AND s.message <> 'being deleted'
                    AND EXISTS (SELECT 1 FROM machines m WHERE m.id = s.machine_id AND m.state IN ('running', 'stopped')),
                COALESCE((SELECT MAX(t.id) FROM tasks t WHERE t.machine_id = s.machine_id AND t.kind = 'reclaim'
                            AND json_extract(t.payload, '$.snapshot_id') = s.id), 0)
         FROM snapshots s WHERE {UNNEEDED} ORDER BY s.id"
    ))
    .fetch_all(pool)
    .await?;
    for (id, machine_id, needs_sight, reclaim_task) in candidates {
        if needs_sight && seen.get(&machine_id).is_none_or(|settled| reclaim_task > *settled) {
            continue;
        }
        let Some((marked, machine)) = claim(pool, id).await? else {
            continue;
        };
        let why = "deleted: its machine no longer needs this restore point";
        match tokio::time::timeout(REMOVE_TIMEOUT, remove_marked(pool, fleet, &marked, None, "snapshot.collect", why))
            .await
        {
            Ok(Ok(())) => {
                let what =
                    format!("reclaim snapshot {} of machine {machine} (image {})", marked.name, marked.reference);
                tracing::info!("collected {what}");
                swept.deleted.push(what);
            }
            // The database is the pass's to report; the engine's refusals
            // are this snapshot's, and the next pass tries it again.
            Ok(Err(PlatformError::Database(e))) => return Err(PlatformError::Database(e)),
            Ok(Err(e)) => swept.not_deleted.push(format!("reclaim snapshot {}: {e}", marked.name)),
            Err(_) => swept.not_deleted.push(format!(
                "reclaim snapshot {}: the engine did not remove its image within {} s",
                marked.name,
                REMOVE_TIMEOUT.as_secs()
            )),
        }
    }
    Ok(swept)
}

/// Checks again, under the write lock, that the snapshot is not needed
/// (a restore or a reinstall may have begun since the candidates were
/// read), and marks it in the same commit; `None` when it is needed.
/// Also returns its machine's name. One left marked by a pass (or a
/// user's delete) that stopped part-way is taken up again like any other:
/// an engine refusal then leaves it marked, as it was.
async fn claim(pool: &Pool, id: i64) -> Result<Option<(Marked, String)>, PlatformError> {
    let mut tx = transitions::begin(pool).await?;
    let row: Option<(String, String, Option<i64>, String, String, String)> = sqlx::query_as(&format!(
        "SELECT s.name, s.image_ref, s.node_id, s.state, s.message, s.machine_name FROM snapshots s WHERE s.id = ? AND {UNNEEDED}"
    ))
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((name, reference, node_id, state, message, machine)) = row else {
        return Ok(None);
    };
    let state = state.parse()?;
    if !image_users(&mut tx, id, &reference).await?.is_empty() {
        return Ok(None);
    }
    mark(&mut tx, id).await?;
    tx.commit().await?;
    Ok(Some((Marked { id, name, reference, node_id, state, message }, machine)))
}
