//! What the portal's front page shows.

use crate::error::AppError;
use gantry_platform::accounts::QuotaView;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The front page's data: the group's quota and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardView {
    pub quota: QuotaView,
    pub next: NextSteps,
}

/// What the dashboard tells someone whose portal cannot create a machine
/// yet: their group has no quota, or no node is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextSteps {
    pub group: String,
    pub group_has_quota: bool,
    pub ready_nodes: i64,
}

/// The signed-in user's group and its GPU quota.
#[server(prefix = "/api", endpoint = "my_quota")]
pub async fn my_quota() -> Result<QuotaView, AppError> {
    // The request's user was read with its group's quota, this request.
    Ok(crate::state::auth()?.quota())
}

/// The front page's data in one answer: the group's quota, and whether
/// the signed-in user can create a machine right now (and if not, why: no
/// quota in their group, no ready node). One resource rather than two:
/// one fetch and one Suspense boundary fewer on every view of the page.
#[server(prefix = "/api", endpoint = "dashboard")]
pub async fn dashboard() -> Result<DashboardView, AppError> {
    let pool = crate::state::pool()?;
    let quota = my_quota().await?;
    let ready_nodes = gantry_platform::first_run::ready_nodes(&pool).await?;
    let next = NextSteps { group: quota.group.clone(), group_has_quota: quota.gpu_quota > 0, ready_nodes };
    Ok(DashboardView { quota, next })
}
