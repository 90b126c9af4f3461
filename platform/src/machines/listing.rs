//! One window of the machines and tasks lists, with filters and the counts
//! per state, for the portal's list pages. Isolation is the same SQL
//! condition as everywhere ([`super::visibility`]); filters only narrow it.
//!
//! Cost stays flat as tables grow: rows come from `ORDER BY id DESC LIMIT`
//! over an index, and the per-state counts come from covering indexes
//! (migration 0010) rather than from the rows themselves.

use super::{views::machine_select, visibility, MachineView, TaskView};
use crate::{accounts::User, db::Pool, PlatformError};
use gantry_core::paging::PageRequest;

/// Narrowing of a list; `None` everywhere lists everything the viewer may
/// see. Values are already checked (states and kinds against the core's
/// names, names trimmed and bounded).
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub state: Option<String>,
    /// Owner of a machine, requester of a task.
    pub user: Option<String>,
    /// Group name; only narrows an admin's view (others see one group).
    pub group: Option<String>,
    /// Task kind; tasks only.
    pub kind: Option<String>,
}

/// One page of rows, how many match the filter, and how many of the
/// viewer's rows (other filters applied, state not) are in each state.
#[derive(Debug, Clone)]
pub struct Window<T> {
    pub rows: Vec<T>,
    pub total: i64,
    pub by_state: Vec<(String, i64)>,
}

// Parameters: `?1` the visibility bind, `?2` user, `?3` group, then for
// tasks `?4` kind; the state filter and the window follow.
const MACHINE_FILTER: &str = "m.state <> 'deleted' AND m.workload = 'dev'
    AND (?2 IS NULL OR m.owner_id = (SELECT id FROM users WHERE username = ?2))
    AND (?3 IS NULL OR m.group_id = (SELECT id FROM groups WHERE name = ?3))";

const TASK_FILTER: &str = "(?2 IS NULL OR t.requester_id = (SELECT id FROM users WHERE username = ?2))
    AND (?3 IS NULL OR t.group_id = (SELECT id FROM groups WHERE name = ?3))
    AND (?4 IS NULL OR t.kind = ?4)";

pub async fn machines_window(pool: &Pool, viewer: &User, filter: &ListFilter, page: PageRequest) -> Result<Window<MachineView>, PlatformError> {
    let (cond, bind) = visibility(viewer, "m.group_id");
    let cond = cond.replace('?', "?1");
    let rows = sqlx::query_as(&format!(
        "{} WHERE ({cond}) AND {MACHINE_FILTER} AND (?4 IS NULL OR m.state = ?4) ORDER BY m.id DESC LIMIT ?5 OFFSET ?6",
        machine_select()
    ))
    .bind(bind)
    .bind(&filter.user)
    .bind(&filter.group)
    .bind(&filter.state)
    .bind(page.per_page)
    .bind(page.offset())
    .fetch_all(pool)
    .await?;
    let by_state: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT m.state, COUNT(*) FROM machines m WHERE ({cond}) AND {MACHINE_FILTER} GROUP BY m.state ORDER BY m.state"
    ))
    .bind(bind)
    .bind(&filter.user)
    .bind(&filter.group)
    .fetch_all(pool)
    .await?;
    Ok(Window { rows, total: total_for(&by_state, filter.state.as_deref()), by_state })
}

pub async fn tasks_window(pool: &Pool, viewer: &User, filter: &ListFilter, page: PageRequest) -> Result<Window<TaskView>, PlatformError> {
    let (cond, bind) = visibility(viewer, "t.group_id");
    let cond = cond.replace('?', "?1");
    let rows = sqlx::query_as(&format!(
        "SELECT t.id, t.kind, t.machine_id, t.machine_name, u.username AS requester, t.state, t.progress, t.message,
                t.attempts, t.created_at, t.updated_at
         FROM tasks t JOIN users u ON u.id = t.requester_id
         WHERE ({cond}) AND {TASK_FILTER} AND (?5 IS NULL OR t.state = ?5)
         ORDER BY t.id DESC LIMIT ?6 OFFSET ?7"
    ))
    .bind(bind)
    .bind(&filter.user)
    .bind(&filter.group)
    .bind(&filter.kind)
    .bind(&filter.state)
    .bind(page.per_page)
    .bind(page.offset())
    .fetch_all(pool)
    .await?;
    let by_state: Vec<(String, i64)> =
        sqlx::query_as(&format!("SELECT t.state, COUNT(*) FROM tasks t WHERE ({cond}) AND {TASK_FILTER} GROUP BY t.state ORDER BY t.state"))
            .bind(bind)
            .bind(&filter.user)
            .bind(&filter.group)
            .bind(&filter.kind)
            .fetch_all(pool)
            .await?;
    Ok(Window { rows, total: total_for(&by_state, filter.state.as_deref()), by_state })
}

fn total_for(by_state: &[(String, i64)], state: Option<&str>) -> i64 {
    by_state.iter().filter(|(s, _)| state.is_none_or(|want| want == s)).map(|(_, n)| n).sum()
}
