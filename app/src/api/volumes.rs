//! Kept data volumes: listed for the signed-in user's group (admins: all),
//! and deleted on request (the collector then removes them from their node).

use crate::{error::AppError, model::machines::KeptVolumeRow};
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "kept_volumes")]
pub async fn kept_volumes() -> Result<Vec<KeptVolumeRow>, AppError> {
    let user = crate::state::auth()?;
    let list = gantry_platform::machines::list_kept_volumes(&crate::state::pool()?, &user).await?;
    Ok(list.into_iter().map(kept_volume_row).collect())
}

/// Forgets a kept volume; returns its name. Another group's volume is
/// "not found" (404).
#[server(prefix = "/api", endpoint = "delete_kept_volume")]
pub async fn delete_kept_volume(volume_id: i64) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let name = gantry_platform::machines::delete_kept_volume(&crate::state::pool()?, &user, volume_id).await?;
    Ok(name)
}

#[cfg(feature = "ssr")]
pub(crate) fn kept_volume_row(v: gantry_platform::machines::KeptVolumeView) -> KeptVolumeRow {
    KeptVolumeRow {
        id: v.id,
        name: v.name,
        node: v.node,
        owner: v.owner,
        size_gb: v.size_gb,
        enforced: v.enforced,
        from_machine: v.from_machine,
        kept_at: v.kept_at,
    }
}
