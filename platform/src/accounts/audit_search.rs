//! The audit log as the admin console reads it: filtered by actor, action
//! and time, newest first, one page at a time. Pages are keyed by id (the
//! next page starts below the last id shown), so a page costs one indexed
//! range scan however long the log is, and rows written meanwhile do not
//! shift what the next page shows.

use crate::{audit::AuditEntry, db::Pool, PlatformError};

#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Exact username of who acted; `Some("system")` means no actor.
    pub actor: Option<String>,
    /// An action (`user.disable`), or a family ending in `.` (`user.`).
    pub action: Option<String>,
    /// Unix seconds, inclusive.
    pub since: Option<i64>,
    /// Unix seconds, exclusive.
    pub until: Option<i64>,
    /// Only rows older than this id (the previous page's `next_before`).
    pub before: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditPage {
    pub rows: Vec<AuditEntry>,
    /// Where the next (older) page starts, if there is one.
    pub next_before: Option<i64>,
}

pub const AUDIT_PAGE_MAX: i64 = 200;

pub async fn search_audit(pool: &Pool, filter: &AuditFilter, limit: i64) -> Result<AuditPage, PlatformError> {
    let limit = limit.clamp(1, AUDIT_PAGE_MAX);
    let mut sql = String::from(
        "SELECT a.id, a.at, u.username AS actor, a.action, a.detail
         FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id WHERE 1 = 1",
    );
    let mut texts: Vec<String> = Vec::new();
    let mut ints: Vec<i64> = Vec::new();
    // Parameters are bound in the order the clauses are added: texts for
    // actor/action first, then the integers.
    match filter.actor.as_deref() {
        Some(gantry_core::validate::SYSTEM_ACTOR) => sql.push_str(" AND a.actor_id IS NULL"),
        Some(name) => {
            sql.push_str(" AND a.actor_id = (SELECT id FROM users WHERE username = ?)");
            texts.push(name.to_string());
        }
        None => {}
    }
    if let Some(action) = filter.action.as_deref() {
        if let Some(family) = action.strip_suffix('.') {
            sql.push_str(" AND a.action >= ? AND a.action < ?");
            texts.push(format!("{family}."));
            texts.push(format!("{family}/")); // '/' sorts right after '.'
        } else {
            sql.push_str(" AND a.action = ?");
            texts.push(action.to_string());
        }
    }
    for (value, clause) in
        [(filter.since, " AND a.at >= ?"), (filter.until, " AND a.at < ?"), (filter.before, " AND a.id < ?")]
    {
        if let Some(v) = value {
            sql.push_str(clause);
            ints.push(v);
        }
    }
    sql.push_str(" ORDER BY a.id DESC LIMIT ?");
    let mut q = sqlx::query_as::<_, AuditEntry>(&sql);
    for t in &texts {
        q = q.bind(t);
    }
    for i in &ints {
        q = q.bind(*i);
    }
    let mut rows = q.bind(limit + 1).fetch_all(pool).await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let next_before = if more { rows.last().map(|r| r.id) } else { None };
    Ok(AuditPage { rows, next_before })
}
