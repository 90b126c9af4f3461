//! Choosing the GPUs for a new dev machine: the group's rules first (so a
//! refusal names the rule a person can change), then the cluster's capacity.
//! The caller persists the result and the quota deduction in one transaction;
//! this module only decides, from a snapshot it is given.

use crate::task::string_enum;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

mod index;
pub use index::ClusterIndex;

string_enum! {
    NodeState, "node state" {
        Ready => "ready",
        /// Keeps its machines but takes no new ones (e.g. before maintenance).
        Draining => "draining",
        Down => "down",
        /// Gone for good (hardware dead, host reinstalled): its machines were
        /// released; their leftovers are collected if its engine answers.
        Lost => "lost",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuView {
    /// The GPU's index on its node; unique within the node.
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub taken: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    pub id: i64,
    pub name: String,
    pub state: NodeState,
    /// Unix seconds.
    pub last_heartbeat: i64,
    pub gpus: Vec<GpuView>,
}

impl NodeView {
    /// Only a ready node that spoke recently may take a machine: a silent
    /// node may be gone, and a container sent there would never start.
    pub fn is_schedulable(&self, now: i64, heartbeat_timeout_secs: i64) -> bool {
        self.state == NodeState::Ready && now.saturating_sub(self.last_heartbeat) <= heartbeat_timeout_secs
    }

    /// Free GPUs per model, each list sorted by index. An index listed twice
    /// counts as free only if no listing says taken: a malformed view must
    /// never lead to handing out a GPU someone holds.
    fn free_by_model(&self) -> BTreeMap<&str, Vec<&GpuView>> {
        let taken: BTreeSet<u32> = self.gpus.iter().filter(|g| g.taken).map(|g| g.index).collect();
        let mut seen = BTreeSet::new();
        let mut free: BTreeMap<&str, Vec<&GpuView>> = BTreeMap::new();
        for gpu in &self.gpus {
            if !taken.contains(&gpu.index) && seen.insert(gpu.index) {
                free.entry(gpu.model.as_str()).or_default().push(gpu);
            }
        }
        for list in free.values_mut() {
            list.sort_by_key(|g| g.index);
        }
        free
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterView {
    pub nodes: Vec<NodeView>,
    pub heartbeat_timeout_secs: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPolicy {
    pub group_name: String,
    pub gpu_quota: i64,
    pub gpus_in_use: i64,
    pub max_gpus_per_machine: i64,
    /// Empty means any model.
    pub allowed_models: Vec<String>,
}

impl GroupPolicy {
    /// GPUs the group may still take. Negative when an admin lowered the
    /// quota below what the group holds: nothing is taken away, but nothing
    /// new is granted until enough is released.
    pub fn available(&self) -> i64 {
        self.gpu_quota.saturating_sub(self.gpus_in_use)
    }

    pub fn allows_model(&self, model: &str) -> bool {
        self.allowed_models.is_empty() || self.allowed_models.iter().any(|m| m == model)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRequest {
    pub gpu_count: u32,
    /// None: any model the group may use.
    pub model: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub node_id: i64,
    pub node_name: String,
    /// Sorted by index.
    pub gpus: Vec<GpuView>,
    pub model: String,
}

/// Why no GPUs were allocated, in words a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum Refusal {
    #[error("a machine needs at least 1 GPU")]
    ZeroGpus,
    #[error("group {group} may use at most {} per machine; this machine asks for {asked}", gpus(.max))]
    OverMachineLimit { group: String, asked: u32, max: i64 },
    #[error("group {group} may not use {model} GPUs (allowed: {})", .allowed.join(", "))]
    ModelNotAllowed { group: String, model: String, allowed: Vec<String> },
    #[error("group {group} holds {in_use} of {}; this machine asks for {asked}", gpus(.quota))]
    OverQuota { group: String, in_use: i64, quota: i64, asked: u32 },
    #[error("group {group}'s GPU quota is {}; this machine asks for {asked}, more than the whole quota", gpus(.quota))]
    OverQuotaCeiling { group: String, quota: i64, asked: u32 },
    #[error(
        "no ready node has {asked} free {} (most free on one node: {best_free})",
        model_gpus(.model, .asked)
    )]
    NoCapacity { asked: u32, model: Option<String>, best_free: u32 },
}

fn gpus(n: &i64) -> String {
    if *n == 1 {
        "1 GPU".to_string()
    } else {
        format!("{n} GPUs")
    }
}

fn model_gpus(model: &Option<String>, n: &u32) -> String {
    let noun = if *n == 1 { "GPU" } else { "GPUs" };
    match model {
        Some(m) => format!("{m} {noun}"),
        None => noun.to_string(),
    }
}

/// The group's own rules, in the order a person would fix them: a request
/// that breaks several gets the most fundamental reason.
pub(crate) fn check_policy(policy: &GroupPolicy, request: &AllocationRequest) -> Result<(), Refusal> {
    check_fixed_rules(policy, request)?;
    let asked = request.gpu_count;
    if policy.available() < i64::from(asked) {
        return Err(Refusal::OverQuota {
            group: policy.group_name.clone(),
            in_use: policy.gpus_in_use,
            quota: policy.gpu_quota,
            asked,
        });
    }
    Ok(())
}

/// The group's rules no release of GPUs can change: a request refused here
/// is refused until an admin changes the group, so a queue must not wait
/// for it (a compute task fails instead). The quota counts as a ceiling
/// only beyond its whole size; within it, GPUs in use are "not now".
pub fn check_ceilings(policy: &GroupPolicy, request: &AllocationRequest) -> Result<(), Refusal> {
    check_fixed_rules(policy, request)?;
    if i64::from(request.gpu_count) > policy.gpu_quota {
        return Err(Refusal::OverQuotaCeiling {
            group: policy.group_name.clone(),
            quota: policy.gpu_quota,
            asked: request.gpu_count,
        });
    }
    Ok(())
}

/// Zero GPUs, GPUs per machine and the allowed models: what neither time
/// nor releases change.
fn check_fixed_rules(policy: &GroupPolicy, request: &AllocationRequest) -> Result<(), Refusal> {
    let asked = request.gpu_count;
    if asked == 0 {
        return Err(Refusal::ZeroGpus);
    }
    if i64::from(asked) > policy.max_gpus_per_machine {
        return Err(Refusal::OverMachineLimit {
            group: policy.group_name.clone(),
            asked,
            max: policy.max_gpus_per_machine,
        });
    }
    if let Some(model) = &request.model {
        if !policy.allows_model(model) {
            return Err(Refusal::ModelNotAllowed {
                group: policy.group_name.clone(),
                model: model.clone(),
                allowed: policy.allowed_models.clone(),
            });
        }
    }
    Ok(())
}

/// Picks `request.gpu_count` free GPUs of one model on one schedulable node.
///
/// Among the (node, model) pairs that fit, the one with the fewest free GPUs
/// wins: packing small machines into nearly full nodes keeps whole nodes free
/// for large requests. Ties go by node name, node id, then model, so every
/// replica deciding from the same view picks the same GPUs.
pub fn allocate(
    cluster: &ClusterView,
    policy: &GroupPolicy,
    request: &AllocationRequest,
    now: i64,
) -> Result<Allocation, Refusal> {
    check_policy(policy, request)?;
    let asked = request.gpu_count as usize;
    let wanted = |model: &str| match &request.model {
        Some(m) => m == model,
        None => policy.allows_model(model),
    };

    let mut best_free = 0usize;
    let mut best: Option<((usize, &str, i64, &str), &NodeView, Vec<&GpuView>)> = None;
    let schedulable = cluster.nodes.iter().filter(|n| n.is_schedulable(now, cluster.heartbeat_timeout_secs));
    for node in schedulable {
        for (model, free) in node.free_by_model() {
            if !wanted(model) {
                continue;
            }
            best_free = best_free.max(free.len());
            if free.len() < asked {
                continue;
            }
            let key = (free.len(), node.name.as_str(), node.id, model);
            if best.as_ref().is_none_or(|(best_key, _, _)| key < *best_key) {
                best = Some((key, node, free));
            }
        }
    }

    match best {
        Some(((_, _, _, model), node, free)) => Ok(Allocation {
            node_id: node.id,
            node_name: node.name.clone(),
            gpus: free.into_iter().take(asked).cloned().collect(),
            model: model.to_string(),
        }),
        None => Err(Refusal::NoCapacity {
            asked: request.gpu_count,
            model: request.model.clone(),
            best_free: u32::try_from(best_free).unwrap_or(u32::MAX),
        }),
    }
}

/// Marks the allocation's GPUs taken in the view, as the database row will be.
pub fn apply(cluster: &mut ClusterView, alloc: &Allocation) {
    let indexes: Vec<u32> = alloc.gpus.iter().map(|g| g.index).collect();
    set_taken(cluster, alloc.node_id, &indexes, true);
}

/// Marks GPUs on a node free again, e.g. after the machine is deleted.
pub fn release(cluster: &mut ClusterView, node_id: i64, gpu_indexes: &[u32]) {
    set_taken(cluster, node_id, gpu_indexes, false);
}

fn set_taken(cluster: &mut ClusterView, node_id: i64, gpu_indexes: &[u32], taken: bool) {
    for node in cluster.nodes.iter_mut().filter(|n| n.id == node_id) {
        for gpu in node.gpus.iter_mut().filter(|g| gpu_indexes.contains(&g.index)) {
            gpu.taken = taken;
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
