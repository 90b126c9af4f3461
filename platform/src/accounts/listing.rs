//! The admin console's users list, a window at a time: filtered by a name
//! fragment, a group and a status (active or disabled), with the count of
//! each status under the other filters, ordered by username.

use super::{User, UserRow, USER_SELECT};
use crate::{db::Pool, PlatformError};
use gantry_core::paging::PageRequest;

/// What "state" means for users.
pub const USER_STATES: [&str; 2] = ["active", "disabled"];

#[derive(Debug, Clone, Default)]
pub struct UserFilter {
    /// Part of the username.
    pub name: Option<String>,
    /// Exact group name.
    pub group: Option<String>,
    /// "active" or "disabled".
    pub status: Option<String>,
}

pub struct UsersWindow {
    pub rows: Vec<User>,
    /// Users matching every filter.
    pub total: i64,
    /// Users per status, with the name and group filters applied.
    pub by_status: Vec<(String, i64)>,
}

/// `LIKE` with the user's text taken literally.
fn like(fragment: &str) -> String {
    let escaped: String =
        fragment.chars().flat_map(|c| if matches!(c, '%' | '_' | '\\') { vec!['\\', c] } else { vec![c] }).collect();
    format!("%{escaped}%")
}

pub async fn users_window(pool: &Pool, filter: &UserFilter, page: PageRequest) -> Result<UsersWindow, PlatformError> {
    // ?1 name pattern, ?2 group, ?3 disabled flag (NULL: any).
    const WHERE: &str = "(?1 IS NULL OR u.username LIKE ?1 ESCAPE '\\') AND (?2 IS NULL OR g.name = ?2)";
    let name = filter.name.as_deref().map(like);
    let disabled = filter.status.as_deref().map(|s| (s == "disabled") as i64);
    let counts: Vec<(i64, i64)> = sqlx::query_as(&format!(
        "SELECT u.disabled, COUNT(*) FROM users u JOIN groups g ON g.id = u.group_id WHERE {WHERE} GROUP BY u.disabled"
    ))
    .bind(&name)
    .bind(&filter.group)
    .fetch_all(pool)
    .await?;
    let by_status: Vec<(String, i64)> =
        counts.iter().map(|(d, n)| (USER_STATES[(*d != 0) as usize].to_string(), *n)).collect();
    let total = counts.iter().filter(|(d, _)| disabled.is_none_or(|want| want == *d)).map(|(_, n)| n).sum();
    let rows: Vec<UserRow> = sqlx::query_as(&format!(
        "{USER_SELECT} WHERE {WHERE} AND (?3 IS NULL OR u.disabled = ?3) ORDER BY u.username LIMIT ?4 OFFSET ?5"
    ))
    .bind(&name)
    .bind(&filter.group)
    .bind(disabled)
    .bind(page.per_page)
    .bind(page.offset())
    .fetch_all(pool)
    .await?;
    Ok(UsersWindow { rows: rows.into_iter().map(User::try_from).collect::<Result<_, _>>()?, total, by_status })
}
