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

/// An access that reads or writes data without changing Gantry's own
/// state — a machine's files, its logs, a dataset file, a sign-in — noted
/// with who (if anyone), what, the client's address and the bytes when
/// they are known: `{what} from {address}[, {bytes} bytes]`. One INSERT;
/// a failure is logged, never returned: the access itself has happened
/// (or is under way) and must not fail for want of its trace.
pub async fn access(
    db: &crate::db::Pool,
    actor_id: Option<i64>,
    action: &str,
    what: &str,
    client: Option<&str>,
    bytes: Option<u64>,
) {
    let detail = access_detail(what, client, bytes);
    if let Err(e) = record(db, actor_id, action, &detail).await {
        tracing::error!(error = %e, action, detail, "could not write the audit log");
    }
}

/// The detail line of [`access`].
pub fn access_detail(what: &str, client: Option<&str>, bytes: Option<u64>) -> String {
    let from = client.filter(|c| !c.is_empty()).unwrap_or("an unknown address");
    match bytes {
        Some(n) => format!("{what} from {from}, {n} bytes"),
        None => format!("{what} from {from}"),
    }
}

/// A name the client typed (a failed sign-in's username: hostile input),
/// as an audit line may show it: at most [`UNTRUSTED_NAME_CHARS`]
/// characters, quoted, control characters and quotes escaped.
pub fn untrusted_name(name: &str) -> String {
    let mut cut: String = name.chars().take(UNTRUSTED_NAME_CHARS).collect();
    let more = cut.len() < name.len();
    cut = format!("{cut:?}");
    if more {
        cut.push('…');
    }
    cut
}

pub const UNTRUSTED_NAME_CHARS: usize = 64;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_lines_say_where_from_and_how_much() {
        assert_eq!(
            access_detail("machine m1: /data/a", Some("10.0.0.1"), Some(5)),
            "machine m1: /data/a from 10.0.0.1, 5 bytes"
        );
        assert_eq!(access_detail("x", None, None), "x from an unknown address");
    }

    #[test]
    fn untrusted_names_are_cut_and_escaped() {
        assert_eq!(untrusted_name("alice"), "\"alice\"");
        assert_eq!(untrusted_name("a\nb\"c"), "\"a\\nb\\\"c\"");
        let long = "é".repeat(100);
        let shown = untrusted_name(&long);
        assert_eq!(shown, format!("{:?}…", "é".repeat(UNTRUSTED_NAME_CHARS)));
    }
}
