//! The admin console's server functions for the GPU cluster: worker nodes,
//! the image catalogue, and group policies. Every one starts with
//! `require_admin()`.

use crate::{
    error::AppError,
    model::{fleet::NodeRow, machines::ImageRow, GroupRow},
};
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "admin/nodes")]
pub async fn list_nodes() -> Result<Vec<NodeRow>, AppError> {
    use gantry_platform::cluster::{self, HEARTBEAT_TIMEOUT_SECS};
    crate::state::require_admin()?;
    let now = gantry_platform::now();
    let nodes = cluster::list_nodes(&crate::state::pool()?).await?;
    Ok(nodes
        .into_iter()
        .map(|n| NodeRow {
            heartbeat_fresh: n.last_heartbeat > 0 && now.saturating_sub(n.last_heartbeat) <= HEARTBEAT_TIMEOUT_SECS,
            gpu_models: crate::model::machines::split_models(&n.gpu_models),
            id: n.id,
            name: n.name,
            region: n.region,
            executor: n.executor,
            docker_endpoint: n.docker_endpoint,
            state: n.state,
            last_heartbeat: n.last_heartbeat,
            cpu_count: n.cpu_count,
            memory_mb: n.memory_mb,
            gpu_total: n.gpu_total,
            gpu_free: n.gpu_free,
            simulated: n.simulated,
        })
        .collect())
}

/// Ready, draining (keeps its machines, takes no new ones) or down.
#[server(prefix = "/api", endpoint = "admin/set_node_state")]
pub async fn set_node_state(node_id: i64, state: String) -> Result<(), AppError> {
    use gantry_core::alloc::NodeState;
    let admin = crate::state::require_admin()?;
    let state: NodeState = state.trim().parse().map_err(|e: gantry_core::task::UnknownVariant| AppError::Invalid(e.to_string()).respond())?;
    gantry_platform::transitions::node::set_state(&crate::state::pool()?, Some(admin.id), node_id, state, "").await?;
    Ok(())
}

#[server(prefix = "/api", endpoint = "admin/images")]
pub async fn list_images() -> Result<Vec<ImageRow>, AppError> {
    crate::state::require_admin()?;
    let images = gantry_platform::images::list_images(&crate::state::pool()?).await?;
    Ok(images.into_iter().map(image_row).collect())
}

#[server(prefix = "/api", endpoint = "admin/create_image")]
pub async fn create_image(name: String, reference: String, description: String, make_default: Option<String>) -> Result<ImageRow, AppError> {
    let admin = crate::state::require_admin()?;
    let make_default = crate::model::machines::checkbox(make_default.as_deref());
    let image = gantry_platform::images::create_image(
        &crate::state::pool()?,
        Some(admin.id),
        name.trim(),
        reference.trim(),
        description.trim(),
        make_default,
    )
    .await?;
    Ok(image_row(image))
}

/// Sets a group's GPU quota, most GPUs per machine and allowed GPU models
/// (comma-separated; empty = any). A quota below what the group holds is
/// allowed: nothing is taken away, new requests are refused.
#[server(prefix = "/api", endpoint = "admin/update_group")]
pub async fn update_group(
    group_id: i64,
    gpu_quota: String,
    max_gpus_per_machine: String,
    allowed_models: String,
) -> Result<GroupRow, AppError> {
    use crate::model::machines::{parse_whole, split_models};
    let admin = crate::state::require_admin()?;
    let invalid = |m: String| AppError::Invalid(m).respond();
    let quota = parse_whole("GPU quota", &gpu_quota).map_err(invalid)?;
    let max = parse_whole("GPUs per machine", &max_gpus_per_machine).map_err(invalid)?;
    let models = split_models(&allowed_models);
    let pool = crate::state::pool()?;
    let g = gantry_platform::policy::update_group_policy(&pool, Some(admin.id), group_id, quota, max, &models).await?;
    let allowed = gantry_platform::policy::allowed_models(&pool, g.id).await?;
    Ok(crate::api::admin::group_row(g, allowed))
}

#[cfg(feature = "ssr")]
pub(crate) fn image_row(i: gantry_platform::images::Image) -> ImageRow {
    ImageRow { id: i.id, name: i.name, reference: i.reference, description: i.description, is_default: i.is_default }
}
