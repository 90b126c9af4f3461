//! Data that travels between server and browser.

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

/// The signed-in account, as the UI needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub group: String,
    /// An admin set a temporary password: choose a new one first.
    #[serde(default)]
    pub must_change_password: bool,
}

impl Me {
    pub fn is_admin(&self) -> bool {
        self.role.is_admin()
    }
}

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

/// The account the server resolved for this request (see `state`); in the
/// browser this is never called, the value comes from the page.
pub fn session_user_on_server() -> Option<Me> {
    #[cfg(feature = "ssr")]
    {
        crate::state::request_user().map(Me::from)
    }
    #[cfg(not(feature = "ssr"))]
    {
        None
    }
}

#[cfg(feature = "ssr")]
impl From<gantry_platform::accounts::User> for Me {
    fn from(u: gantry_platform::accounts::User) -> Self {
        Me {
            id: u.id,
            username: u.username,
            role: u.role,
            group: u.group_name,
            must_change_password: u.must_change_password,
        }
    }
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
