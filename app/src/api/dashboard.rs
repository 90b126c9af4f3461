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
