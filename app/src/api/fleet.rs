//! The admin console's server functions for the GPU cluster: worker nodes,
//! the image catalogue, and group policies (with the images and regions a
//! group may use). Every one starts with `require_admin()`.

use crate::error::AppError;
use gantry_platform::{cluster::NodeSummary, images::Image};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// What marking a node lost did, for the admin's confirmation line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostNode {
    pub node: String,
    pub machines: Vec<String>,
    pub gpus_refunded: i64,
    pub tasks_ended: i64,
}

impl LostNode {
    /// "node gpu-2 marked lost: 1 machine(s) released (box-1), 1 GPU(s)
    /// refunded, 0 task(s) ended".
    pub fn summary(&self) -> String {
        let names = if self.machines.is_empty() { String::new() } else { format!(" ({})", self.machines.join(", ")) };
        format!(
            "node {} marked lost: {} machine(s) released{names}, {} GPU(s) refunded, {} task(s) ended",
            self.node,
            self.machines.len(),
            self.gpus_refunded,
            self.tasks_ended
        )
    }
}

/// Every node with its GPUs, capacity and whether its heartbeat is fresh.
#[server(prefix = "/api", endpoint = "admin/nodes")]
pub async fn list_nodes() -> Result<Vec<NodeSummary>, AppError> {
    crate::state::require_admin()?;
    Ok(gantry_platform::cluster::list_nodes(&crate::state::pool()?).await?)
}

/// Adds a worker node by its engine endpoint with the GPUs the admin
/// declares there. The platform tests the connection first and saves
/// nothing when the engine does not answer. `simulated://NAME` adds a
/// simulated node instead (simulated GPUs, the simulated executor, no
/// engine). Returns the node's id.
#[server(prefix = "/api", endpoint = "admin/add_node")]
pub async fn add_node(
    name: String,
    region_code: String,
    endpoint: String,
    gpu_count: String,
    gpu_model: String,
    arch: Option<String>,
) -> Result<i64, AppError> {
    let admin = crate::state::require_admin()?;
    let input = crate::model::fleet::parse_add_node(&name, &region_code, &endpoint, &gpu_count, &gpu_model)
        .map_err(|m| AppError::Invalid(m).respond())?;
    let req = gantry_platform::nodes::AddNode {
        name: input.name,
        region_code: input.region_code,
        endpoint: input.endpoint,
        gpu_count: input.gpu_count,
        gpu_model: input.gpu_model,
        arch: arch.unwrap_or_default(),
    };
    Ok(gantry_platform::nodes::add_node(&crate::state::pool()?, &crate::state::fleet()?, admin.id, &req).await?)
}

/// Ready, draining (keeps its machines, takes no new ones) or down, with
/// an optional reason. "lost" is refused here: it releases the node's
/// machines, so it goes through `mark_node_lost` and its confirmation.
#[server(prefix = "/api", endpoint = "admin/set_node_state")]
pub async fn set_node_state(node_id: i64, state: String, reason: Option<String>) -> Result<(), AppError> {
    use gantry_core::alloc::NodeState;
    let admin = crate::state::require_admin()?;
    let state: NodeState = state
        .trim()
        .parse()
        .map_err(|e: gantry_core::task::UnknownVariant| AppError::Invalid(e.to_string()).respond())?;
    if state == NodeState::Lost {
        return Err(AppError::Invalid(
            "a node is marked lost with \"Mark lost\", which asks for a reason and a confirmation".into(),
        )
        .respond());
    }
    let reason = reason.as_deref().unwrap_or("").trim();
    gantry_platform::transitions::node::set_state(&crate::state::pool()?, Some(admin.id), node_id, state, reason)
        .await?;
    Ok(())
}

/// The node is gone for good: its machines become `lost` with their GPUs
/// given back to their groups, and its open tasks end. Needs the
/// confirmation checkbox, so a stray post cannot release machines.
#[server(prefix = "/api", endpoint = "admin/mark_node_lost")]
pub async fn mark_node_lost(node_id: i64, reason: String, confirm: Option<String>) -> Result<LostNode, AppError> {
    let admin = crate::state::require_admin()?;
    if !crate::model::machines::checkbox(confirm.as_deref()) {
        return Err(AppError::Invalid(
            "tick \"I understand its machines will be released\" to mark the node lost".into(),
        )
        .respond());
    }
    let pool = crate::state::pool()?;
    let report = gantry_platform::transitions::node::mark_lost(&pool, Some(admin.id), node_id, reason.trim()).await?;
    let node = gantry_platform::cluster::list_nodes(&pool)
        .await?
        .into_iter()
        .find(|n| n.id == node_id)
        .map(|n| n.name)
        .unwrap_or_default();
    Ok(LostNode {
        node,
        machines: report.machines,
        gpus_refunded: report.gpus_refunded,
        tasks_ended: report.tasks_ended,
    })
}

/// Forgets a node that holds no live machine (a lost one, or one drained
/// empty); returns its name.
#[server(prefix = "/api", endpoint = "admin/remove_node")]
pub async fn remove_node(node_id: i64) -> Result<String, AppError> {
    let admin = crate::state::require_admin()?;
    let name = gantry_platform::transitions::node::remove(&crate::state::pool()?, Some(admin.id), node_id).await?;
    crate::state::fleet()?.forget(node_id);
    Ok(name)
}

#[server(prefix = "/api", endpoint = "admin/images")]
pub async fn list_images() -> Result<Vec<Image>, AppError> {
    crate::state::require_admin()?;
    Ok(gantry_platform::images::list_images(&crate::state::pool()?).await?)
}

#[server(prefix = "/api", endpoint = "admin/create_image")]
pub async fn create_image(
    name: String,
    reference: String,
    description: String,
    make_default: Option<String>,
) -> Result<Image, AppError> {
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
    Ok(image)
}

/// Sets a group's GPU quota, most GPUs per machine and allowed GPU models
/// (comma-separated; empty = any), and optionally the most CPUs and memory
/// (GB) a machine may ask for. A quota below what the group holds is
/// allowed: nothing is taken away, new requests are refused.
///
/// `allowed_images` and `allowed_regions` are image and region ids, posted
/// as `allowed_images[]=3&allowed_images[]=5` (checkboxes; the form adds
/// one empty entry so that ticking none still sends the field): empty =
/// all. Absent: the list is left as it is. They are saved in the same
/// transaction and audit row as the quota and models; an unknown id
/// refuses the whole edit (400) and changes nothing. So is
/// `snapshot_quota` (absent or empty: left as it is), and so are
/// `root_disk_gb` (what one machine may write outside /data) and
/// `snapshot_disk_gb` (what the group's snapshots may take together): GB
/// with up to three decimals, 0 = no limit.
///
/// `policy_rev` is the group's revision the form was rendered from: when
/// another edit has landed since, the save is refused (409) and nothing
/// changes, rather than writing back every field as this page saw it.
/// Absent or empty (scripts): not checked, the last save wins.
#[server(prefix = "/api", endpoint = "admin/update_group")]
pub async fn update_group(
    group_id: i64,
    gpu_quota: String,
    max_gpus_per_machine: String,
    allowed_models: String,
    max_cpus_per_machine: Option<String>,
    max_memory_gb_per_machine: Option<String>,
    allowed_images: Option<Vec<String>>,
    allowed_regions: Option<Vec<String>>,
    snapshot_quota: Option<String>,
    policy_rev: Option<String>,
    root_disk_gb: Option<String>,
    snapshot_disk_gb: Option<String>,
) -> Result<gantry_platform::accounts::Group, AppError> {
    use crate::model::machines::{parse_whole, split_models};
    let admin = crate::state::require_admin()?;
    let invalid = |m: String| AppError::Invalid(m).respond();
    let quota = parse_whole("GPU quota", &gpu_quota).map_err(invalid)?;
    let max = parse_whole("GPUs per machine", &max_gpus_per_machine).map_err(invalid)?;
    let models = split_models(&allowed_models);
    let ids = |label: &str, list: Option<Vec<String>>| -> Result<Option<Vec<i64>>, AppError> {
        list.map(|l| {
            l.iter()
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(|v| parse_whole(label, v).map_err(invalid))
                .collect()
        })
        .transpose()
    };
    let access = gantry_platform::policy_access::AccessChange {
        images: ids("an allowed image", allowed_images)?,
        regions: ids("an allowed region", allowed_regions)?,
    };
    let given = |v: &Option<String>| v.as_deref().map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned);
    // Both limits or neither: one alone was silently dropped before.
    let limits = match (given(&max_cpus_per_machine), given(&max_memory_gb_per_machine)) {
        (Some(cpus), Some(mem)) => {
            let cpus = parse_whole("CPUs per machine", &cpus).map_err(invalid)?;
            let mem = parse_whole("memory per machine (GB)", &mem).map_err(invalid)?;
            Some((cpus, mem))
        }
        (None, None) => None,
        _ => return Err(invalid("give both the CPUs and the memory per machine, or neither".into())),
    };
    let snapshot_quota =
        given(&snapshot_quota).map(|q| parse_whole("snapshot quota", &q)).transpose().map_err(invalid)?;
    // GB with up to three decimals (0.02 = 20 MB), 0: no limit.
    let gb = |label: &str, v: &Option<String>| given(v).map(|v| gantry_core::disk::parse_gb(label, &v)).transpose();
    let disk = gantry_platform::policy_disk::DiskLimits {
        root_disk_mb: gb("root filesystem per machine (GB)", &root_disk_gb).map_err(invalid)?,
        snapshot_disk_mb: gb("snapshot storage (GB)", &snapshot_disk_gb).map_err(invalid)?,
    };
    let expected_rev = given(&policy_rev).map(|r| parse_whole("policy revision", &r)).transpose().map_err(invalid)?;
    let pool = crate::state::pool()?;
    // One transaction: a limit out of range refuses the whole edit.
    let g = gantry_platform::policy::update_group_policy_with_disk(
        &pool,
        Some(admin.id),
        group_id,
        quota,
        max,
        &models,
        &access,
        limits,
        snapshot_quota,
        &disk,
        expected_rev,
    )
    .await?;
    let allowed = gantry_platform::policy::allowed_models(&pool, g.id).await?;
    Ok(gantry_platform::accounts::Group { allowed_models: allowed, ..g })
}

/// What a group's image and region checkboxes offer, and what each group
/// has ticked (an empty list: all).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupAccessChoices {
    /// Dev-machine images (not the internal ones of compute tasks): (id, name).
    pub images: Vec<(i64, String)>,
    /// Regions: (id, code, name).
    pub regions: Vec<(i64, String, String)>,
    pub groups: Vec<GroupAccessRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupAccessRow {
    pub group_id: i64,
    /// (id, name) of the allowed images; empty = all.
    pub images: Vec<(i64, String)>,
    /// (id, code) of the allowed regions; empty = all.
    pub regions: Vec<(i64, String)>,
}

impl GroupAccessChoices {
    /// The row of group `group_id` (an empty one, "all", when it has none).
    pub fn of(&self, group_id: i64) -> GroupAccessRow {
        self.groups
            .iter()
            .find(|g| g.group_id == group_id)
            .cloned()
            .unwrap_or(GroupAccessRow { group_id, ..Default::default() })
    }
}

#[server(prefix = "/api", endpoint = "admin/group_access")]
pub async fn group_access() -> Result<GroupAccessChoices, AppError> {
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    let images = gantry_platform::images::list_images(&pool).await?.into_iter().map(|i| (i.id, i.name)).collect();
    let regions =
        gantry_platform::catalogue::list_regions(&pool).await?.into_iter().map(|r| (r.id, r.code, r.name)).collect();
    let mut groups: Vec<GroupAccessRow> = gantry_platform::policy_access::all_group_access(&pool)
        .await?
        .into_iter()
        .map(|(group_id, a)| GroupAccessRow { group_id, images: a.images, regions: a.regions })
        .collect();
    groups.sort_by_key(|g| g.group_id);
    Ok(GroupAccessChoices { images, regions, groups })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_node_summary_names_what_was_released() {
        let l = LostNode { node: "gpu-2".into(), machines: vec!["box-1".into()], gpus_refunded: 1, tasks_ended: 0 };
        assert_eq!(
            l.summary(),
            "node gpu-2 marked lost: 1 machine(s) released (box-1), 1 GPU(s) refunded, 0 task(s) ended"
        );
    }
}
