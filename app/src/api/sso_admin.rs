//! Admin → Sign-in: the mappings of directory groups to Gantry groups and
//! roles, and the switch that turns local passwords off except for the
//! break-glass admin (all audited by the platform's `sso` module).

use crate::error::AppError;
use gantry_platform::sso::{mapping::MappingRow, settings::Settings};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// What the page shows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SignInView {
    pub mappings: Vec<MappingRow>,
    /// Gantry groups a mapping may name.
    pub groups: Vec<String>,
    pub settings: Settings,
    /// The directory's URL when `--ldap-url` is set.
    pub ldap_url: Option<String>,
}

/// The directory configured at start (`--ldap-url`), put into each
/// request's extensions by the server.
pub fn ldap() -> Option<std::sync::Arc<gantry_platform::sso::ldap::LdapConfig>> {
    crate::api::auth::request_extension::<Option<std::sync::Arc<gantry_platform::sso::ldap::LdapConfig>>>().flatten()
}

#[server(prefix = "/api", endpoint = "admin/sign_in_setup")]
pub async fn sign_in_setup() -> Result<SignInView, AppError> {
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    Ok(SignInView {
        mappings: gantry_platform::sso::mapping::list_mappings(&pool).await?,
        groups: gantry_platform::accounts::list_groups(&pool).await?.into_iter().map(|g| g.name).collect(),
        settings: gantry_platform::sso::settings::settings(&pool).await?,
        ldap_url: ldap().map(|l| l.url().to_string()),
    })
}

/// Maps `directory_group` (an LDAP group DN or name, an OIDC group) to a
/// Gantry group and role; answers the directory group.
#[server(prefix = "/api", endpoint = "admin/add_sso_mapping")]
pub async fn add_sso_mapping(
    directory_group: String,
    group: String,
    role: String,
    priority: String,
) -> Result<String, AppError> {
    let admin = crate::state::require_admin()?;
    let role: gantry_core::Role = role.trim().parse()?;
    let priority: i64 = priority.trim().parse().map_err(|_| {
        AppError::Invalid(format!("the priority must be a whole number, not {:?}", priority.trim())).respond()
    })?;
    let row = gantry_platform::sso::mapping::add_mapping(
        &crate::state::pool()?,
        admin.id,
        &directory_group,
        group.trim(),
        role,
        priority,
    )
    .await?;
    Ok(row.directory_group)
}

#[server(prefix = "/api", endpoint = "admin/remove_sso_mapping")]
pub async fn remove_sso_mapping(id: i64) -> Result<i64, AppError> {
    let admin = crate::state::require_admin()?;
    gantry_platform::sso::mapping::remove_mapping(&crate::state::pool()?, admin.id, id).await?;
    Ok(id)
}

/// `off` is the checkbox (present when ticked).
#[server(prefix = "/api", endpoint = "admin/set_local_passwords")]
pub async fn set_local_passwords(off: Option<String>, break_glass_admin: String) -> Result<bool, AppError> {
    let admin = crate::state::require_admin()?;
    let name = Some(break_glass_admin.trim()).filter(|n| !n.is_empty());
    let s = gantry_platform::sso::settings::set_local_passwords(&crate::state::pool()?, admin.id, off.is_some(), name)
        .await?;
    Ok(s.local_passwords_off)
}
