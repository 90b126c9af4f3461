//! Kept data volumes: listed for the signed-in user's group (admins: all),
//! and deleted on request (the collector then removes them from their node).

use crate::error::AppError;
use gantry_platform::machines::KeptVolumeView;
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "kept_volumes")]
pub async fn kept_volumes() -> Result<Vec<KeptVolumeView>, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::machines::list_kept_volumes(&crate::state::pool()?, &user).await?)
}

/// Forgets a kept volume; returns its name. Another group's volume is
/// "not found" (404).
#[server(prefix = "/api", endpoint = "delete_kept_volume")]
pub async fn delete_kept_volume(volume_id: i64) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let name = gantry_platform::machines::delete_kept_volume(&crate::state::pool()?, &user, volume_id).await?;
    Ok(name)
}
