//! The data about dev machines, tasks, images and kept volumes that travels
//! between server and browser.

use crate::model::QuotaView;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineRow {
    pub id: i64,
    pub name: String,
    pub owner: String,
    pub group: String,
    pub image: String,
    pub gpu_count: i64,
    pub gpu_model: String,
    /// GPU indexes on the node, ascending; empty once released.
    pub gpu_indexes: Vec<u32>,
    pub simulated: bool,
    pub node: Option<String>,
    pub volume_name: String,
    pub volume_size_gb: i64,
    pub volume_enforced: bool,
    pub container_id: Option<String>,
    pub state: String,
    pub exit_code: Option<i64>,
    pub message: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRow {
    pub id: i64,
    pub kind: String,
    pub machine_id: Option<i64>,
    pub machine_name: String,
    pub requester: String,
    pub state: String,
    pub progress: i64,
    pub message: String,
    pub attempts: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineDetail {
    pub machine: MachineRow,
    /// Whether the viewer may restart, reinstall, delete or snapshot the
    /// machine (its owner or an admin; a group member only looks), decided
    /// on the server by the rule the platform enforces.
    pub can_operate: bool,
    /// A compute task's machine: it ends with its task, which its owner
    /// cancels (the machine's own actions are an admin's).
    pub job: bool,
    /// The viewer owns the machine (what the job note tells them differs).
    pub mine: bool,
    /// The machine's tasks, newest first.
    pub tasks: Vec<TaskRow>,
    /// Sealed dataset versions bound read-only: (`code/version`, path inside).
    pub datasets: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRow {
    pub id: i64,
    pub name: String,
    pub reference: String,
    pub description: String,
    pub is_default: bool,
}

/// A data volume kept when its machine was deleted; a new machine can be
/// created on it (on its node), or it can be deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptVolumeRow {
    pub id: i64,
    pub name: String,
    pub node: String,
    pub owner: String,
    pub size_gb: i64,
    /// Whether the size is a hard limit (a block device) on its node.
    pub enforced: bool,
    pub from_machine: String,
    /// Unix seconds.
    pub kept_at: i64,
}

/// What the create form offers the signed-in user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateOptions {
    pub images: Vec<ImageRow>,
    /// Models present in the cluster that the group may use.
    pub gpu_models: Vec<String>,
    pub max_gpus_per_machine: i64,
    pub quota: QuotaView,
    /// Kept volumes a new machine may be created on.
    pub kept_volumes: Vec<KeptVolumeRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedMachine {
    pub machine_id: i64,
    pub task_id: i64,
    pub name: String,
    pub node: String,
    pub gpu_indexes: Vec<u32>,
    pub model: String,
}
