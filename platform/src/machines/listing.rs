//! One window of the machines and tasks lists, with filters and the counts
//! per state, for the portal's list pages. Isolation is the same SQL
//! condition as everywhere ([`super::visibility`]); filters only narrow it.
//!
//! Cost stays flat as tables grow: the window's ids come from an index
//! walked newest first (a filter that is set is a plain `=` the planner can
//! use; one that is not set is left out), the row details are read for
//! those ids only, and the per-state counts come from the count tables the
//! triggers of migration 0014 keep, not from the rows.

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

/// `cond` when the filter is set; otherwise a condition that is always
/// true but still names the parameter (every numbered parameter is bound).
pub(crate) fn when(set: bool, cond: &str, param: &str) -> String {
    if set {
        cond.to_string()
    } else {
        format!("{param} IS NULL")
    }
}

// Parameters: `?1` the visibility bind, `?2` user, `?3` group, then for
// tasks `?4` kind; the state filter and the window follow. The conditions
// name the columns `m.` and `t.` of the rows and of the count tables alike.
fn machine_filter(f: &ListFilter) -> String {
    format!(
        "m.state <> 'deleted' AND m.workload = 'dev' AND {} AND {}",
        when(f.user.is_some(), "m.owner_id = (SELECT id FROM users WHERE username = ?2)", "?2"),
        when(f.group.is_some(), "m.group_id = (SELECT id FROM groups WHERE name = ?3)", "?3"),
    )
}

fn task_filter(f: &ListFilter) -> String {
    format!(
        "{} AND {} AND {}",
        when(f.user.is_some(), "t.requester_id = (SELECT id FROM users WHERE username = ?2)", "?2"),
        when(f.group.is_some(), "t.group_id = (SELECT id FROM groups WHERE name = ?3)", "?3"),
        when(f.kind.is_some(), "t.kind = ?4", "?4"),
    )
}

/// The isolation condition with its parameter numbered `?1`.
pub(crate) fn visible_as_1(viewer: &User, group_column: &str) -> (String, i64) {
    let (cond, bind) = visibility(viewer, group_column);
    (cond.replace('?', "?1"), bind)
}

/// The ids of one window of machines, newest first. Parameters: `?1` the
/// visibility bind, `?2` user, `?3` group, `?4` state, `?5` limit, `?6`
/// offset. Public so that a test can check its query plan.
pub fn machine_ids_sql(viewer: &User, filter: &ListFilter) -> (String, i64) {
    let (cond, bind) = visible_as_1(viewer, "m.group_id");
    let filters = machine_filter(filter);
    let state = when(filter.state.is_some(), "m.state = ?4", "?4");
    (format!("SELECT m.id FROM machines m WHERE ({cond}) AND {filters} AND {state} ORDER BY m.id DESC LIMIT ?5 OFFSET ?6"), bind)
}

/// The ids of one window of tasks, newest first: `?1`–`?3` as for
/// machines, `?4` kind, `?5` state, `?6` limit, `?7` offset.
pub fn task_ids_sql(viewer: &User, filter: &ListFilter) -> (String, i64) {
    let (cond, bind) = visible_as_1(viewer, "t.group_id");
    let filters = task_filter(filter);
    let state = when(filter.state.is_some(), "t.state = ?5", "?5");
    (
        format!(
            "SELECT t.id FROM tasks t WHERE ({cond}) AND {filters} AND {state} ORDER BY t.id DESC LIMIT ?6 OFFSET ?7"
        ),
        bind,
    )
}

pub async fn machines_window(
    pool: &Pool,
    viewer: &User,
    filter: &ListFilter,
    page: PageRequest,
) -> Result<Window<MachineView>, PlatformError> {
    let (ids, bind) = machine_ids_sql(viewer, filter);
    let rows = sqlx::query_as(&format!("{} WHERE m.id IN ({ids}) ORDER BY m.id DESC", machine_select()))
        .bind(bind)
        .bind(&filter.user)
        .bind(&filter.group)
        .bind(&filter.state)
        .bind(page.per_page)
        .bind(page.offset())
        .fetch_all(pool)
        .await?;
    let (cond, filters) = (visible_as_1(viewer, "m.group_id").0, machine_filter(filter));
    let by_state: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT m.state, SUM(m.n) FROM machine_counts m WHERE ({cond}) AND {filters} GROUP BY m.state HAVING SUM(m.n) > 0 ORDER BY m.state"
    ))
    .bind(bind)
    .bind(&filter.user)
    .bind(&filter.group)
    .fetch_all(pool)
    .await?;
    Ok(Window { rows, total: total_for(&by_state, filter.state.as_deref()), by_state })
}

pub async fn tasks_window(
    pool: &Pool,
    viewer: &User,
    filter: &ListFilter,
    page: PageRequest,
) -> Result<Window<TaskView>, PlatformError> {
    let (ids, bind) = task_ids_sql(viewer, filter);
    let rows = sqlx::query_as(&format!(
        "SELECT t.id, t.kind, t.machine_id, t.machine_name, u.username AS requester, t.state, t.progress, t.message,
                t.attempts, t.created_at, t.updated_at, {}
         FROM tasks t JOIN users u ON u.id = t.requester_id
         WHERE t.id IN ({ids}) ORDER BY t.id DESC",
        super::views::IS_START_SQL
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
    let (cond, filters) = (visible_as_1(viewer, "t.group_id").0, task_filter(filter));
    let by_state: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT t.state, SUM(t.n) FROM task_counts t WHERE ({cond}) AND {filters} GROUP BY t.state HAVING SUM(t.n) > 0 ORDER BY t.state"
    ))
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
