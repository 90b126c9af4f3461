//! A new installation that works on first start: the `default` group gets
//! the GPUs found on the first node, so a newcomer who signs in right after
//! `make run` can create a machine instead of meeting "quota 0".
//!
//! Only the very first node triggers it, and only while the group's quota
//! is still 0: a later start, a second node or an admin's own choice (even
//! an explicit 0 set after the first start) is never overridden.

use crate::{accounts, audit, db::Pool, PlatformError};

/// Whether no node was ever registered in this database. Read before the
/// local node registers itself. No node now is not enough: an installation
/// whose nodes were all removed (audited) is not new, and an admin's
/// explicit quota of 0 must not be replaced at its next start.
pub async fn is_new_cluster(pool: &Pool) -> Result<bool, PlatformError> {
    let seen: i64 = sqlx::query_scalar(
        "SELECT (SELECT COUNT(*) FROM nodes) + (SELECT COUNT(*) FROM audit_log WHERE action IN ('node.remove', 'group.first_run_quota'))",
    )
    .fetch_one(pool)
    .await?;
    Ok(seen == 0)
}

/// Gives the default group a quota of `gpus` when it has none yet. Returns
/// the quota granted, or `None` when nothing changed.
pub async fn grant_first_node_gpus(pool: &Pool, node_name: &str, gpus: i64) -> Result<Option<i64>, PlatformError> {
    if gpus <= 0 {
        return Ok(None);
    }
    let group_id = accounts::ensure_default_group(pool).await?;
    let mut tx = crate::transitions::begin(pool).await?;
    let changed =
        sqlx::query("UPDATE groups SET gpu_quota = ?, policy_rev = policy_rev + 1 WHERE id = ? AND gpu_quota = 0")
            .bind(gpus)
            .bind(group_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    if changed == 0 {
        return Ok(None);
    }
    let detail = format!(
        "first start: group {} gets GPU quota 0 → {gpus}, the GPUs found on the first node {node_name}",
        accounts::DEFAULT_GROUP
    );
    audit::record(&mut *tx, None, "group.first_run_quota", &detail).await?;
    tx.commit().await?;
    Ok(Some(gpus))
}

/// Nodes that may take a machine now: ready, with a recent heartbeat.
pub async fn ready_nodes(pool: &Pool) -> Result<i64, PlatformError> {
    let fresh_since = crate::now() - crate::cluster::HEARTBEAT_TIMEOUT_SECS;
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM nodes WHERE state = 'ready' AND last_heartbeat >= ?")
        .bind(fresh_since)
        .fetch_one(pool)
        .await?;
    Ok(n)
}
