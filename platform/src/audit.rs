//! The audit log: one row per state change that matters, with who did it.

use crate::{now, PlatformError};
use serde::Serialize;
use sqlx::SqliteExecutor;

pub async fn record<'e>(
    db: impl SqliteExecutor<'e>,
    actor_id: Option<i64>,
    action: &str,
    detail: &str,
) -> Result<(), PlatformError> {
    sqlx::query("INSERT INTO audit_log (at, actor_id, action, detail) VALUES (?, ?, ?, ?)")
        .bind(now())
        .bind(actor_id)
        .bind(action)
        .bind(detail)
        .execute(db)
        .await?;
    Ok(())
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub actor: Option<String>,
    pub action: String,
    pub detail: String,
}

pub async fn recent<'e>(db: impl SqliteExecutor<'e>, limit: i64) -> Result<Vec<AuditEntry>, PlatformError> {
    Ok(sqlx::query_as(
        "SELECT a.id, a.at, u.username AS actor, a.action, a.detail
         FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id
         ORDER BY a.id DESC LIMIT ?",
    )
    .bind(limit)
    .fetch_all(db)
    .await?)
}
