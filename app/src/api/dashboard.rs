//! What the portal's front page shows.

use crate::{
    error::AppError,
    model::{DashboardView, QuotaView},
};
use leptos::prelude::*;

/// The signed-in user's group and its GPU quota.
#[server(prefix = "/api", endpoint = "my_quota")]
pub async fn my_quota() -> Result<QuotaView, AppError> {
    // The request's user was read with its group's quota, this request.
    let user = crate::state::auth()?;
    let q = user.group_quota;
    Ok(QuotaView {
        group: user.group_name,
        gpu_quota: q.gpu_quota,
        gpus_in_use: q.gpus_in_use,
        max_gpus_per_machine: q.max_gpus_per_machine,
    })
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
    let next =
        crate::model::NextSteps { group: quota.group.clone(), group_has_quota: quota.gpu_quota > 0, ready_nodes };
    Ok(DashboardView { quota, next })
}
