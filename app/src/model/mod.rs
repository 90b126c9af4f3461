//! Pure helpers shared by the pages and the island: parsing form fields,
//! formatting figures and links. No IO, and nothing here mirrors the
//! platform's views (pages render those directly).

pub mod catalogue;
pub mod compute;
pub mod datasets;
pub mod fleet;
pub mod lists;
pub mod machines;
pub mod reclaim;
pub mod snapshots;
pub mod telemetry;
pub mod tokens;

use gantry_core::Role;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaView {
    pub group: String,
    pub gpu_quota: i64,
    pub gpus_in_use: i64,
    pub max_gpus_per_machine: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRow {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub group: String,
    #[serde(default)]
    pub disabled: bool,
    /// Holds a temporary password set by an admin.
    #[serde(default)]
    pub must_change_password: bool,
}

/// One page of the audit log and where the next (older) one starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPageView {
    pub rows: Vec<AuditRow>,
    pub next_before: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRow {
    pub id: i64,
    pub name: String,
    pub gpu_quota: i64,
    pub gpus_in_use: i64,
    pub max_gpus_per_machine: i64,
    pub max_cpus_per_machine: i64,
    pub max_memory_gb_per_machine: i64,
    /// Snapshots its members may keep.
    pub snapshot_quota: i64,
    pub members: i64,
    /// GPU models the group may use; empty means any.
    pub allowed_models: Vec<String>,
    /// The policy revision these values are from; the policy form posts it
    /// back so that a save over a newer edit is refused (409).
    pub policy_rev: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    pub id: i64,
    pub at: i64,
    pub actor: Option<String>,
    pub action: String,
    pub detail: String,
}

/// The front page's data: the group's quota and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardView {
    pub quota: QuotaView,
    pub next: NextSteps,
}

/// What the dashboard tells someone whose portal cannot create a machine
/// yet: their group has no quota, or no node is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextSteps {
    pub group: String,
    pub group_has_quota: bool,
    pub ready_nodes: i64,
}

/// The sign-in page that comes back to `next` (percent-encoded).
pub fn login_url(next: &str) -> String {
    format!("/login?next={}", gantry_core::url::encode_path(next))
}
