//! The audit log: one row per state change that matters, with who did it.

use crate::{now, PlatformError};
use serde::{Deserialize, Serialize};
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

/// Many rows of one action in few statements: (actor, detail) each.
pub async fn record_many(
    conn: &mut sqlx::SqliteConnection,
    action: &str,
    rows: &[(i64, String)],
    at: i64,
) -> Result<(), PlatformError> {
    // 4 parameters a row, well under SQLite's 32,766-parameter limit.
    for chunk in rows.chunks(1000) {
        let values = vec!["(?, ?, ?, ?)"; chunk.len()].join(", ");
        let sql = format!("INSERT INTO audit_log (at, actor_id, action, detail) VALUES {values}");
        let mut q = sqlx::query(&sql);
        for (actor, detail) in chunk {
            q = q.bind(at).bind(*actor).bind(action).bind(detail);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
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
