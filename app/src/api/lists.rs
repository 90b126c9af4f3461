//! The machines, tasks and compute tasks lists, a window at a time with filters and
//! per-state counts. Values come from query strings: states and kinds are
//! checked against the core's names (a typo is a 400 naming the choices),
//! page numbers are clamped, and who sees what is the platform's rule.
//! The arguments are flat optional fields (not one struct) so that an empty
//! query — the unfiltered first page — is an empty, valid request body.

use crate::{error::AppError, model::lists::Listed};
use gantry_platform::{
    accounts::User,
    machines::{MachineView, TaskView},
};
use leptos::prelude::*;

#[server(name = GetMachinesWindow, prefix = "/api", endpoint = "machines_window")]
pub async fn machines_window(
    state: Option<String>,
    user: Option<String>,
    group: Option<String>,
    page: Option<String>,
) -> Result<Listed<MachineView>, AppError> {
    use gantry_core::task::MachineState;
    let query = crate::model::lists::ListQuery { state, user, group, kind: None, page };
    let user = crate::state::auth()?;
    let (filter, page) = server::filter(&query, MachineState::ALL.iter().map(|s| s.as_str()), None)?;
    let window = gantry_platform::machines::machines_window(&crate::state::pool()?, &user, &filter, page).await?;
    let counts = server::counts(window.total, page, window.by_state);
    Ok(Listed { rows: window.rows, counts })
}

#[server(name = GetTasksWindow, prefix = "/api", endpoint = "tasks_window")]
pub async fn tasks_window(
    state: Option<String>,
    user: Option<String>,
    group: Option<String>,
    kind: Option<String>,
    page: Option<String>,
) -> Result<Listed<TaskView>, AppError> {
    use gantry_core::task::{TaskKind, TaskState};
    let query = crate::model::lists::ListQuery { state, user, group, kind, page };
    let user = crate::state::auth()?;
    let kinds: Vec<&str> = TaskKind::ALL.iter().map(|k| k.as_str()).collect();
    let (filter, page) = server::filter(&query, TaskState::ALL.iter().map(|s| s.as_str()), Some(&kinds))?;
    let window = gantry_platform::machines::tasks_window(&crate::state::pool()?, &user, &filter, page).await?;
    let counts = server::counts(window.total, page, window.by_state);
    Ok(Listed { rows: window.rows, counts })
}

/// Compute tasks: `user` is the requester. Their states are the task
/// states' names (the `compute_tasks` table allows exactly those).
#[server(name = GetComputeWindow, prefix = "/api", endpoint = "compute_window")]
pub async fn compute_window(
    state: Option<String>,
    user: Option<String>,
    group: Option<String>,
    page: Option<String>,
) -> Result<Listed<gantry_platform::compute::ComputeTaskView>, AppError> {
    use gantry_core::task::TaskState;
    let query = crate::model::lists::ListQuery { state, user, group, kind: None, page };
    let user = crate::state::auth()?;
    let (filter, page) = server::filter(&query, TaskState::ALL.iter().map(|s| s.as_str()), None)?;
    let window = gantry_platform::compute::compute_window(&crate::state::pool()?, &user, &filter, page).await?;
    let counts = server::counts(window.total, page, window.by_state);
    Ok(Listed { rows: window.rows, counts })
}

/// The admin console's users: `state` is active or disabled, `user` part of
/// a username, `group` a group's name.
#[server(name = GetUsersWindow, prefix = "/api", endpoint = "admin/users_window")]
pub async fn users_window(
    state: Option<String>,
    user: Option<String>,
    group: Option<String>,
    page: Option<String>,
) -> Result<Listed<User>, AppError> {
    use gantry_core::paging::{choice, name_filter, PageRequest};
    use gantry_platform::accounts::{UserFilter, USER_STATES};
    crate::state::require_admin()?;
    let status = choice("state", state.as_deref(), &USER_STATES).map_err(|m| AppError::Invalid(m).respond())?;
    let filter = UserFilter {
        name: name_filter(user.as_deref()),
        group: name_filter(group.as_deref()),
        status: status.map(str::to_string),
    };
    let page = PageRequest::parse(page.as_deref(), None);
    let window = gantry_platform::accounts::users_window(&crate::state::pool()?, &filter, page).await?;
    let counts = server::counts(window.total, page, window.by_status);
    Ok(Listed { rows: window.rows, counts })
}

pub(crate) mod server {
    use crate::{
        error::AppError,
        model::lists::{ListCounts, ListQuery},
    };
    use gantry_core::paging::{choice, name_filter, page_count, PageRequest};
    use gantry_platform::machines::ListFilter;

    pub fn filter<'a>(
        q: &ListQuery,
        states: impl Iterator<Item = &'a str>,
        kinds: Option<&[&str]>,
    ) -> Result<(ListFilter, PageRequest), AppError> {
        let bad = |m: String| AppError::Invalid(m).respond();
        let states: Vec<&str> = states.collect();
        let state = choice("state", q.state.as_deref(), &states).map_err(bad)?.map(str::to_string);
        let kind = match kinds {
            Some(kinds) => choice("kind", q.kind.as_deref(), kinds).map_err(bad)?.map(str::to_string),
            None => None,
        };
        let filter =
            ListFilter { state, kind, user: name_filter(q.user.as_deref()), group: name_filter(q.group.as_deref()) };
        Ok((filter, PageRequest::parse(q.page.as_deref(), None)))
    }

    pub fn counts(total: i64, page: PageRequest, by_state: Vec<(String, i64)>) -> ListCounts {
        ListCounts {
            total,
            page: page.page,
            per_page: page.per_page,
            pages: page_count(total, page.per_page),
            by_state,
        }
    }
}
