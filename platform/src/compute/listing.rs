//! One window of the compute tasks list, with filters and the counts per
//! state, as the machines and tasks lists have them
//! (`crate::machines::listing`): the window's ids come from an index walked
//! newest first, the row details are read for those ids only, and the
//! counts come from `compute_task_counts`, which the triggers of migration
//! 0027 keep. So a page costs the same with 50 or 50,000 tasks behind it.

use super::views::{list_select, ComputeTaskView};
use crate::{
    accounts::User,
    db::Pool,
    machines::{
        listing::{visible_as_1, when},
        ListFilter, Window,
    },
    PlatformError,
};
use gantry_core::paging::PageRequest;

// `?2` requester, `?3` group. The conditions name the columns `c.` of the
// rows and of the count table alike.
fn compute_filter(f: &ListFilter) -> String {
    format!(
        "{} AND {}",
        when(f.user.is_some(), "c.requester_id = (SELECT id FROM users WHERE username = ?2)", "?2"),
        when(f.group.is_some(), "c.group_id = (SELECT id FROM groups WHERE name = ?3)", "?3"),
    )
}

/// The ids of one window of compute tasks, newest first. Parameters: `?1`
/// the visibility bind, `?2` requester, `?3` group, `?4` state, `?5` limit,
/// `?6` offset. Public so that a test can check its query plan.
pub fn compute_ids_sql(viewer: &User, filter: &ListFilter) -> (String, i64) {
    let (cond, bind) = visible_as_1(viewer, "c.group_id");
    let filters = compute_filter(filter);
    let state = when(filter.state.is_some(), "c.state = ?4", "?4");
    (format!("SELECT c.id FROM compute_tasks c WHERE ({cond}) AND {filters} AND {state} ORDER BY c.id DESC LIMIT ?5 OFFSET ?6"), bind)
}

/// One page of the compute tasks `viewer` may see (own group; admins all),
/// narrowed by `filter` (its `kind` does not apply).
pub async fn compute_window(
    pool: &Pool,
    viewer: &User,
    filter: &ListFilter,
    page: PageRequest,
) -> Result<Window<ComputeTaskView>, PlatformError> {
    let (ids, bind) = compute_ids_sql(viewer, filter);
    let rows = sqlx::query_as(&format!("{} WHERE c.id IN ({ids}) ORDER BY c.id DESC", list_select()))
        .bind(bind)
        .bind(&filter.user)
        .bind(&filter.group)
        .bind(&filter.state)
        .bind(page.per_page)
        .bind(page.offset())
        .fetch_all(pool)
        .await?;
    let (cond, filters) = (visible_as_1(viewer, "c.group_id").0, compute_filter(filter));
    let by_state: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT c.state, SUM(c.n) FROM compute_task_counts c WHERE ({cond}) AND {filters} GROUP BY c.state HAVING SUM(c.n) > 0 ORDER BY c.state"
    ))
    .bind(bind)
    .bind(&filter.user)
    .bind(&filter.group)
    .fetch_all(pool)
    .await?;
    let total =
        by_state.iter().filter(|(s, _)| filter.state.as_deref().is_none_or(|want| want == s)).map(|(_, n)| n).sum();
    Ok(Window { rows, total, by_state })
}
