//! What the portal's front page shows.

use crate::{error::AppError, model::QuotaView};
use leptos::prelude::*;

/// The signed-in user's group and its GPU quota.
#[server(prefix = "/api", endpoint = "my_quota")]
pub async fn my_quota() -> Result<QuotaView, AppError> {
    // The request's user was read with its group's quota, this request.
    let user = crate::state::auth()?;
    let q = user.group_quota;
    Ok(QuotaView { group: user.group_name, gpu_quota: q.gpu_quota, gpus_in_use: q.gpus_in_use, max_gpus_per_machine: q.max_gpus_per_machine })
}

/// Whether the signed-in user can create a machine right now, and if not,
/// why (no quota in their group, no ready node).
#[server(prefix = "/api", endpoint = "next_steps")]
pub async fn next_steps() -> Result<crate::model::NextSteps, AppError> {
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    let ready_nodes = gantry_platform::first_run::ready_nodes(&pool).await?;
    Ok(crate::model::NextSteps { group: user.group_name, group_has_quota: user.group_quota.gpu_quota > 0, ready_nodes })
}
