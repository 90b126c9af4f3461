//! A machine's own filesystem as its page shows it (the disk watcher's
//! last reading against the group's limit).

use crate::error::AppError;
use gantry_platform::disk::usage::DiskUsage;
use leptos::prelude::*;

/// Another group's machine is "not found".
#[server(prefix = "/api", endpoint = "machine_disk")]
pub async fn machine_disk(machine_id: i64) -> Result<DiskUsage, AppError> {
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    Ok(gantry_platform::disk::usage::of_machine(&pool, &user, machine_id).await?)
}
