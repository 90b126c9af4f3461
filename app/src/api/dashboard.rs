//! What the portal's front page shows.

use crate::{error::AppError, model::QuotaView};
use leptos::prelude::*;

/// The signed-in user's group and its GPU quota.
#[server(prefix = "/api", endpoint = "my_quota")]
pub async fn my_quota() -> Result<QuotaView, AppError> {
    let user = crate::state::auth()?;
    let g = gantry_platform::accounts::group_by_id(&crate::state::pool()?, user.group_id).await?;
    Ok(QuotaView { group: g.name, gpu_quota: g.gpu_quota, gpus_in_use: g.gpus_in_use, max_gpus_per_machine: g.max_gpus_per_machine })
}
