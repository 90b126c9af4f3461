//! The admin console's server functions. Every one starts with
//! `require_admin()`: the check lives on the server, not in the page.

use crate::{
    error::AppError,
    model::{AuditRow, GroupRow, UserRow},
};
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "admin/users")]
pub async fn list_users() -> Result<Vec<UserRow>, AppError> {
    crate::state::require_admin()?;
    let users = gantry_platform::accounts::list_users(&crate::state::pool()?).await?;
    Ok(users.into_iter().map(|u| UserRow { id: u.id, username: u.username, role: u.role, group: u.group_name }).collect())
}

#[server(prefix = "/api", endpoint = "admin/create_user")]
pub async fn create_user(username: String, password: String, role: String, group: String) -> Result<UserRow, AppError> {
    use gantry_platform::accounts::{self, NewUser};
    let admin = crate::state::require_admin()?;
    let role: gantry_core::Role = role.parse()?;
    let group = group.trim();
    let new = NewUser {
        username: username.trim(),
        password: &password,
        role,
        group: (!group.is_empty()).then_some(group),
    };
    let u = accounts::create_user(&crate::state::pool()?, Some(admin.id), new).await?;
    Ok(UserRow { id: u.id, username: u.username, role: u.role, group: u.group_name })
}

#[server(prefix = "/api", endpoint = "admin/groups")]
pub async fn list_groups() -> Result<Vec<GroupRow>, AppError> {
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    let groups = gantry_platform::accounts::list_groups(&pool).await?;
    let mut models = gantry_platform::policy::all_allowed_models(&pool).await?;
    Ok(groups
        .into_iter()
        .map(|g| {
            let allowed = models.remove(&g.id).unwrap_or_default();
            group_row(g, allowed)
        })
        .collect())
}

#[server(prefix = "/api", endpoint = "admin/create_group")]
pub async fn create_group(name: String, gpu_quota: String) -> Result<GroupRow, AppError> {
    let admin = crate::state::require_admin()?;
    let quota: i64 = gpu_quota
        .trim()
        .parse()
        .map_err(|_| AppError::Invalid("GPU quota must be a whole number".into()).respond())?;
    let g = gantry_platform::accounts::create_group(&crate::state::pool()?, Some(admin.id), name.trim(), quota).await?;
    Ok(group_row(g, Vec::new()))
}

#[server(prefix = "/api", endpoint = "admin/audit")]
pub async fn recent_audit() -> Result<Vec<AuditRow>, AppError> {
    crate::state::require_admin()?;
    let rows = gantry_platform::audit::recent(&crate::state::pool()?, 200).await?;
    Ok(rows
        .into_iter()
        .map(|a| AuditRow { id: a.id, at: a.at, actor: a.actor, action: a.action, detail: a.detail })
        .collect())
}

#[cfg(feature = "ssr")]
pub(crate) fn group_row(g: gantry_platform::accounts::Group, allowed_models: Vec<String>) -> GroupRow {
    GroupRow {
        id: g.id,
        name: g.name,
        gpu_quota: g.gpu_quota,
        gpus_in_use: g.gpus_in_use,
        max_gpus_per_machine: g.max_gpus_per_machine,
        max_cpus_per_machine: g.max_cpus_per_machine,
        max_memory_gb_per_machine: g.max_memory_gb_per_machine,
        members: g.members,
        allowed_models,
    }
}
