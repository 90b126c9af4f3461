//! Idle reclaim and rebalancing: the banner's notices, a machine's standing
//! and history, extend, one-click restore, the rebalance opt-out, and the
//! admin's settings and exemptions (audited by the platform).

use crate::{error::AppError, model::lists::ListCounts};
use gantry_core::{rebalance::HotSettings, reclaim::ReclaimSettings};
use gantry_platform::reclaim::{GroupExemption, MachineEvent, MachineStanding, ReclaimStatus};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The admin page's data: settings, groups (with exemption) and one page of
/// the machines with their standing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimAdminView {
    pub reclaim: ReclaimSettings,
    pub hot: HotSettings,
    pub groups: Vec<GroupExemption>,
    pub machines: Vec<MachineStanding>,
    /// Which page of the machines this is.
    pub counts: ListCounts,
    /// Why a saved window can never be covered by the raw samples kept
    /// (a restart shortened the retention); empty when all is well.
    pub unwatchable: Vec<String>,
}

/// Warned and reclaimed machines of the viewer's group (the banner).
#[server(prefix = "/api", endpoint = "reclaim_notices")]
pub async fn reclaim_notices() -> Result<Vec<ReclaimStatus>, AppError> {
    let user = crate::state::auth()?;
    // Read with the request's user: nothing to show, nothing more to ask.
    if !user.reclaim_notices {
        return Ok(Vec::new());
    }
    let pool = crate::state::pool()?;
    Ok(gantry_platform::reclaim::notices(&pool, &user).await?)
}

/// One machine's standing and its event history; another group's is 404.
#[server(prefix = "/api", endpoint = "machine_reclaim")]
pub async fn machine_reclaim(machine_id: i64) -> Result<(ReclaimStatus, Vec<MachineEvent>), AppError> {
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    Ok(gantry_platform::reclaim::standing(&pool, &user, machine_id, 50).await?)
}

/// Pushes the reclaim deadline back (limited); returns the new deadline's text.
#[server(prefix = "/api", endpoint = "extend_reclaim")]
pub async fn extend_reclaim(machine_id: i64) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let until = gantry_platform::reclaim::extend(&crate::state::pool()?, &user, machine_id).await?;
    Ok(format!("Extended: reclaimed no earlier than {} UTC.", gantry_core::time::format_utc(until)))
}

/// One-click restore of a reclaimed machine; returns the task id.
#[server(prefix = "/api", endpoint = "restore_machine")]
pub async fn restore_machine(machine_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    let task = gantry_platform::reclaim::restore(&crate::state::pool()?, &user, machine_id).await?;
    crate::state::wake_dispatcher();
    Ok(task)
}

/// The owner keeps the machine off hot-GPU rebalancing (checkbox ticked) or lets it move.
#[server(prefix = "/api", endpoint = "rebalance_opt_out")]
pub async fn rebalance_opt_out(machine_id: i64, opt_out: Option<String>) -> Result<bool, AppError> {
    let user = crate::state::auth()?;
    let out = opt_out.is_some_and(|v| matches!(v.as_str(), "on" | "true" | "1"));
    gantry_platform::reclaim::set_rebalance_opt_out(&crate::state::pool()?, &user, machine_id, out).await?;
    Ok(out)
}

/// The console: settings, groups, and one page of the live dev machines,
/// newest first (it costs the same with 50 or 5,000 machines; all of them
/// were 2 MB of HTML at 14 req/s with 5,000).
#[server(prefix = "/api", endpoint = "reclaim_admin")]
pub async fn reclaim_admin(page: Option<String>) -> Result<ReclaimAdminView, AppError> {
    use gantry_core::paging::PageRequest;
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    let page = PageRequest::parse(page.as_deref(), None);
    let s = gantry_platform::reclaim::load_settings(&pool).await?;
    let gantry_platform::reclaim::Console { groups, machines, total_machines } =
        gantry_platform::reclaim::console(&pool, page).await?;
    let counts = crate::api::lists::server::counts(total_machines, page, Vec::new());
    let raw_keep = gantry_platform::reclaim::raw_retention_secs(&pool).await?;
    let unwatchable = gantry_core::reclaim::windows_outlast_samples(&s.reclaim, &s.hot, raw_keep);
    Ok(ReclaimAdminView { reclaim: s.reclaim, hot: s.hot, groups, machines, counts, unwatchable })
}

/// Saves the settings form (times in minutes); a bad value changes nothing.
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/api", endpoint = "save_reclaim_settings")]
pub async fn save_reclaim_settings(
    enabled: Option<String>,
    threshold_pct: String,
    window_min: String,
    grace_min: String,
    extensions_allowed: String,
    extension_min: String,
    hot_enabled: Option<String>,
    hot_util_pct: String,
    hot_mem_pct: String,
    hot_temp_c: String,
    hot_window_min: String,
) -> Result<String, AppError> {
    let admin = crate::state::require_admin()?;
    let e = enabled.unwrap_or_default();
    let h = hot_enabled.unwrap_or_default();
    let fields = [
        ("enabled", e.as_str()),
        ("threshold_pct", threshold_pct.as_str()),
        ("window_min", window_min.as_str()),
        ("grace_min", grace_min.as_str()),
        ("extensions_allowed", extensions_allowed.as_str()),
        ("extension_min", extension_min.as_str()),
        ("hot_enabled", h.as_str()),
        ("hot_util_pct", hot_util_pct.as_str()),
        ("hot_mem_pct", hot_mem_pct.as_str()),
        ("hot_temp_c", hot_temp_c.as_str()),
        ("hot_window_min", hot_window_min.as_str()),
    ];
    let (reclaim, hot) = crate::model::reclaim::parse_settings(&fields).map_err(|m| AppError::Invalid(m).respond())?;
    gantry_platform::reclaim::save_settings(
        &crate::state::pool()?,
        &admin,
        &gantry_platform::reclaim::Settings { reclaim, hot },
    )
    .await?;
    Ok("Settings saved.".into())
}

#[server(prefix = "/api", endpoint = "set_reclaim_exempt")]
pub async fn set_reclaim_exempt(kind: String, id: i64, exempt: Option<String>) -> Result<String, AppError> {
    let admin = crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    let on = exempt.is_some_and(|v| matches!(v.as_str(), "on" | "true" | "1"));
    match kind.as_str() {
        "group" => gantry_platform::reclaim::set_group_exempt(&pool, &admin, id, on).await?,
        "machine" => gantry_platform::reclaim::set_machine_exempt(&pool, &admin, id, on).await?,
        _ => return Err(AppError::Invalid("kind must be group or machine".into()).respond()),
    }
    Ok(if on { "Exempt from idle reclaim." } else { "Subject to idle reclaim." }.into())
}
