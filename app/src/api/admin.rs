//! The admin console's server functions. Every one starts with
//! `require_admin()`: the check lives on the server, not in the page.

use crate::error::AppError;
use gantry_platform::{
    accounts::{Group, User},
    audit::AuditEntry,
};
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "admin/users")]
pub async fn list_users() -> Result<Vec<User>, AppError> {
    crate::state::require_admin()?;
    Ok(gantry_platform::accounts::list_users(&crate::state::pool()?).await?)
}

#[server(prefix = "/api", endpoint = "admin/create_user")]
pub async fn create_user(username: String, password: String, role: String, group: String) -> Result<User, AppError> {
    use gantry_platform::accounts::{self, NewUser};
    let admin = crate::state::require_admin()?;
    let role: gantry_core::Role = role.parse()?;
    let group = group.trim();
    let new =
        NewUser { username: username.trim(), password: &password, role, group: (!group.is_empty()).then_some(group) };
    Ok(accounts::create_user(&crate::state::pool()?, Some(admin.id), new).await?)
}

/// `disable` or `enable` an account; disabling ends its sessions at once.
#[server(prefix = "/api", endpoint = "admin/set_user_enabled")]
pub async fn set_user_enabled(user_id: i64, action: String) -> Result<User, AppError> {
    let admin = crate::state::require_admin()?;
    let disabled = match action.as_str() {
        "disable" => true,
        "enable" => false,
        _ => return Err(AppError::Invalid("action must be disable or enable".into()).respond()),
    };
    Ok(gantry_platform::accounts::set_disabled(&crate::state::pool()?, admin.id, user_id, disabled).await?)
}

/// Sets a temporary password the user must change at their next sign-in.
#[server(prefix = "/api", endpoint = "admin/reset_password")]
pub async fn reset_password(user_id: i64, password: String) -> Result<User, AppError> {
    let admin = crate::state::require_admin()?;
    Ok(gantry_platform::accounts::reset_password(&crate::state::pool()?, admin.id, user_id, &password).await?)
}

#[server(prefix = "/api", endpoint = "admin/set_user_role")]
pub async fn set_user_role(user_id: i64, role: String) -> Result<User, AppError> {
    let admin = crate::state::require_admin()?;
    let role: gantry_core::Role = role.parse()?;
    Ok(gantry_platform::accounts::set_role(&crate::state::pool()?, admin.id, user_id, role).await?)
}

#[server(prefix = "/api", endpoint = "admin/set_user_group")]
pub async fn set_user_group(user_id: i64, group: String) -> Result<User, AppError> {
    let admin = crate::state::require_admin()?;
    Ok(gantry_platform::accounts::set_group(&crate::state::pool()?, admin.id, user_id, group.trim()).await?)
}

#[server(prefix = "/api", endpoint = "admin/groups")]
pub async fn list_groups() -> Result<Vec<Group>, AppError> {
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    let groups = gantry_platform::accounts::list_groups(&pool).await?;
    let mut models = gantry_platform::policy::all_allowed_models(&pool).await?;
    Ok(groups.into_iter().map(|g| Group { allowed_models: models.remove(&g.id).unwrap_or_default(), ..g }).collect())
}

#[server(prefix = "/api", endpoint = "admin/create_group")]
pub async fn create_group(name: String, gpu_quota: String) -> Result<Group, AppError> {
    let admin = crate::state::require_admin()?;
    let quota: i64 =
        gpu_quota.trim().parse().map_err(|_| AppError::Invalid("GPU quota must be a whole number".into()).respond())?;
    Ok(gantry_platform::accounts::create_group(&crate::state::pool()?, Some(admin.id), name.trim(), quota).await?)
}

#[server(prefix = "/api", endpoint = "admin/audit")]
pub async fn recent_audit() -> Result<Vec<AuditEntry>, AppError> {
    crate::state::require_admin()?;
    Ok(gantry_platform::audit::recent(&crate::state::pool()?, 200).await?)
}

/// What a `before` that names no audit entry (not a number, or below 1)
/// is refused with — by [`audit_page`] and, for text that is not a number,
/// by the audit page before it asks.
pub const AUDIT_BEFORE_INVALID: &str = "before must be an audit entry id (a whole number from 1)";

/// The audit log filtered by actor (a username, or `system`), action (or a
/// family such as `user.`) and days (`YYYY-MM-DD`, UTC, both inclusive),
/// newest first; `before` continues below the last id of a page (ids start
/// at 1: a smaller one is refused, 400, rather than matching nothing).
#[server(prefix = "/api", endpoint = "admin/audit_page")]
pub async fn audit_page(
    actor: Option<String>,
    action: Option<String>,
    since: Option<String>,
    until: Option<String>,
    before: Option<i64>,
) -> Result<gantry_platform::accounts::AuditPage, AppError> {
    use gantry_core::time::parse_date;
    crate::state::require_admin()?;
    if before.is_some_and(|b| b < 1) {
        return Err(AppError::Invalid(AUDIT_BEFORE_INVALID.into()).respond());
    }
    let text = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let day = |v: Option<String>, what: &str| -> Result<Option<i64>, AppError> {
        match text(v) {
            None => Ok(None),
            Some(d) => parse_date(&d)
                .map(Some)
                .ok_or_else(|| AppError::Invalid(format!("{what} must be a date like 2026-11-30")).respond()),
        }
    };
    let filter = gantry_platform::accounts::AuditFilter {
        actor: text(actor),
        action: text(action),
        since: day(since, "from")?,
        until: day(until, "to")?.map(|d| d + 86_400),
        before,
    };
    Ok(gantry_platform::accounts::search_audit(&crate::state::pool()?, &filter, AUDIT_PAGE_SIZE).await?)
}

pub const AUDIT_PAGE_SIZE: i64 = 50;
