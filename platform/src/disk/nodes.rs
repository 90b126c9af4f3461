//! Nodes' free disk: measured where the node monitor pings (the disk that
//! holds the engine's data root, for an engine on this host; a simulated
//! node's figure is set by its executor; a remote engine's disk is
//! unknown, and said so), shown on the Nodes page, and a floor below
//! which a node takes no new machine (`--node-disk-floor-gb`).

use crate::{db::Pool, executor::Executor, now, PlatformError};
use std::sync::atomic::{AtomicI64, Ordering};

/// The floor's default, in GB.
pub const DEFAULT_FLOOR_GB: i64 = 10;

/// This process's floor (GB; 0: none). One figure for the process, set at
/// start from its configuration: admissions read it under their lock.
static FLOOR_GB: AtomicI64 = AtomicI64::new(DEFAULT_FLOOR_GB);

pub fn set_floor_gb(gb: i64) {
    FLOOR_GB.store(gb.max(0), Ordering::Relaxed);
}

pub fn floor_gb() -> i64 {
    FLOOR_GB.load(Ordering::Relaxed)
}

/// Measures node `node_id`'s disk through its executor and records it;
/// unknown (nothing can measure it) is recorded as unknown. An engine that
/// does not answer leaves the last figure as it was.
pub async fn measure(pool: &Pool, exec: &Executor, node_id: i64) -> Result<(), PlatformError> {
    let space = match exec.disk_space().await {
        Ok(space) => space,
        Err(e) => {
            tracing::debug!(node = node_id, error = %e, "node disk not measured");
            return Ok(());
        }
    };
    sqlx::query("UPDATE nodes SET disk_free_bytes = ?, disk_total_bytes = ?, disk_checked_at = ? WHERE id = ?")
        .bind(space.map(|s| s.0))
        .bind(space.map(|s| s.1))
        .bind(now())
        .bind(node_id)
        .execute(pool)
        .await?;
    Ok(())
}

/// The nodes below the floor now, each with the refusal that names its
/// numbers; read inside the caller's transaction.
pub async fn below_floor(conn: &mut sqlx::SqliteConnection) -> Result<Vec<(i64, String)>, PlatformError> {
    let floor = floor_gb();
    if floor == 0 {
        return Ok(Vec::new());
    }
    let rows: Vec<(i64, String, i64)> =
        sqlx::query_as("SELECT id, name, disk_free_bytes FROM nodes WHERE disk_free_bytes IS NOT NULL")
            .fetch_all(&mut *conn)
            .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, name, free)| gantry_core::disk::below_floor(&name, Some(free), floor).map(|why| (id, why)))
        .collect())
}

/// Why node `node_id` takes no new machine now, if its disk is below the
/// floor (a machine from a snapshot or a restore must go to that node).
pub async fn refusal(conn: &mut sqlx::SqliteConnection, node_id: i64) -> Result<Option<String>, PlatformError> {
    Ok(below_floor(conn).await?.into_iter().find(|(id, _)| *id == node_id).map(|(_, why)| why))
}
