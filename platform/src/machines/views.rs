//! What the portal lists: machines and tasks, filtered by who is looking.

use super::visibility;
use crate::{accounts::User, db::Pool, PlatformError};
use gantry_core::task::{MachineState, TaskKind, TaskState, Workload};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct MachineView {
    pub id: i64,
    pub name: String,
    pub owner: String,
    pub owner_id: i64,
    pub group_name: String,
    pub image: String,
    pub gpu_count: i64,
    pub gpu_model: String,
    /// GPU indexes on the node, ascending; empty once released.
    #[sqlx(try_from = "String")]
    pub gpu_indexes: GpuIndexes,
    pub simulated: bool,
    pub node: Option<String>,
    pub node_id: Option<i64>,
    pub volume_name: String,
    pub volume_size_gb: i64,
    pub volume_enforced: bool,
    pub cpu_millis: i64,
    pub memory_mb: i64,
    pub container_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub state: MachineState,
    pub exit_code: Option<i64>,
    pub message: String,
    pub created_at: i64,
    pub updated_at: i64,
    #[sqlx(try_from = "String")]
    pub workload: Workload,
    /// Put away by its owner's stop (state `reclaimed`): see [`Self::state_label`].
    pub shut_down: bool,
}

/// A machine's GPU indexes on its node, ascending, read from the query's
/// comma-separated list (SQLite's `GROUP_CONCAT`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GpuIndexes(pub Vec<u32>);

impl From<String> for GpuIndexes {
    fn from(list: String) -> Self {
        let mut indexes: Vec<u32> = list.split(',').filter_map(|s| s.trim().parse().ok()).collect();
        indexes.sort_unstable();
        GpuIndexes(indexes)
    }
}

impl std::ops::Deref for GpuIndexes {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        &self.0
    }
}

impl MachineView {
    /// Whether `viewer` may act on this machine as its owner does: restart,
    /// reinstall or delete it, snapshot it or reinstall it from a snapshot
    /// (what the machine page offers). That is its owner or an admin — a group
    /// member only looks. The rule is [`User::acts_for`], the one every
    /// action checks, so what the portal offers is what the platform
    /// accepts. A compute task's machine is an admin's alone to act on:
    /// its owner cancels the task instead (`request_operation` and the
    /// snapshot rules refuse them).
    pub fn may_operate(&self, viewer: &User) -> bool {
        viewer.acts_for(self.owner_id) && (!self.is_job() || viewer.role.is_admin())
    }

    /// A compute task's machine.
    pub fn is_job(&self) -> bool {
        self.workload == Workload::Job
    }

    /// Stopped by its owner (snapshot kept, no container, GPUs released):
    /// Start brings it back. Not `MachineState::Stopped`, whose container
    /// merely exited and still holds its GPUs.
    pub fn is_shut_down(&self) -> bool {
        self.state == MachineState::Reclaimed && self.shut_down
    }

    /// The state as the portal words it: a stopped machine's reclaim
    /// state reads "shut down", so it is not taken for an idle reclaim.
    pub fn state_label(&self) -> &'static str {
        if self.is_shut_down() {
            "shut down"
        } else {
            self.state.as_str()
        }
    }
}

pub(super) fn machine_select() -> String {
    String::from("
    SELECT m.id, m.name, u.username AS owner, m.owner_id, g.name AS group_name, i.name AS image, m.gpu_count, m.gpu_model,
           COALESCE((SELECT GROUP_CONCAT(gp.idx) FROM (SELECT gp.idx FROM machine_gpus mg JOIN gpus gp ON gp.id = mg.gpu_id
                     WHERE mg.machine_id = m.id ORDER BY gp.idx) gp), '') AS gpu_indexes,
           COALESCE((SELECT MAX(gp.simulated) FROM machine_gpus mg JOIN gpus gp ON gp.id = mg.gpu_id WHERE mg.machine_id = m.id), 0) AS simulated,
           n.name AS node, m.node_id, m.volume_name, m.volume_size_gb, m.volume_enforced, m.cpu_millis, m.memory_mb, m.container_id, m.state, m.exit_code, m.message,
           m.created_at, m.updated_at, m.workload, m.shut_down
    FROM machines m JOIN users u ON u.id = m.owner_id JOIN groups g ON g.id = m.group_id
    JOIN images i ON i.id = m.image_id LEFT JOIN nodes n ON n.id = m.node_id")
}

/// The most [`list_machines`] answers.
pub const LIST_MACHINES_MAX: usize = 200;

/// The newest [`LIST_MACHINES_MAX`] live dev machines (not deleted;
/// compute tasks' machines are listed as compute tasks) the viewer may see.
/// The portal's list is the window (`machines_window`); this answer stays
/// bounded for whoever still calls it.
pub async fn list_machines(pool: &Pool, viewer: &User) -> Result<Vec<MachineView>, PlatformError> {
    let (cond, bind) = visibility(viewer, "m.group_id");
    Ok(sqlx::query_as(&format!("{} WHERE m.state <> 'deleted' AND m.workload = 'dev' AND ({cond}) ORDER BY m.id DESC LIMIT {LIST_MACHINES_MAX}", machine_select()))
        .bind(bind)
        .fetch_all(pool)
        .await?)
}

pub async fn machine_detail(pool: &Pool, viewer: &User, machine_id: i64) -> Result<MachineView, PlatformError> {
    let (cond, bind) = visibility(viewer, "m.group_id");
    sqlx::query_as(&format!("{} WHERE m.id = ? AND ({cond})", machine_select()))
        .bind(machine_id)
        .bind(bind)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| PlatformError::NotFound("machine".into()))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct TaskView {
    pub id: i64,
    #[sqlx(try_from = "String")]
    pub kind: TaskKind,
    pub machine_id: Option<i64>,
    pub machine_name: String,
    pub requester: String,
    #[sqlx(try_from = "String")]
    pub state: TaskState,
    pub progress: i64,
    pub message: String,
    pub attempts: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// A restore that is a shut-down machine's Start (its payload says so).
    #[sqlx(default)]
    #[serde(default)]
    pub is_start: bool,
}

/// [`TaskView::is_start`] of task `t`, as a column.
pub const IS_START_SQL: &str =
    "(t.kind = 'restore' AND COALESCE(json_extract(t.payload, '$.start'), 0) = 1) AS is_start";

impl TaskView {
    /// The kind as the task list shows it: a start's restore reads "start".
    pub fn shown_kind(&self) -> &'static str {
        if self.is_start {
            "start"
        } else {
            self.kind.as_str()
        }
    }
}

/// Tasks the viewer may see, newest first; optionally one machine's.
pub async fn list_tasks(
    pool: &Pool,
    viewer: &User,
    machine_id: Option<i64>,
    limit: i64,
) -> Result<Vec<TaskView>, PlatformError> {
    let (sql, bind) = recent_tasks_sql(viewer, machine_id.is_some());
    Ok(sqlx::query_as(&sql).bind(bind).bind(machine_id).bind(limit).fetch_all(pool).await?)
}

/// The SQL of [`list_tasks`] (binds: visibility, machine id, limit). A
/// machine's history is a plain `=` on the machine (the `tasks_machine`
/// index): `?2 IS NULL OR …` would walk every task newest first to find
/// a machine's few (6.7 ms with 50,000 tasks). The unary `+` keeps SQLite
/// from walking the group's index instead (every task of the group).
pub fn recent_tasks_sql(viewer: &User, one_machine: bool) -> (String, i64) {
    let (cond, bind) = visibility(viewer, if one_machine { "+t.group_id" } else { "t.group_id" });
    let machine = if one_machine { "t.machine_id = ?2" } else { "?2 IS NULL" };
    let sql = format!(
        "SELECT t.id, t.kind, t.machine_id, t.machine_name, u.username AS requester, t.state, t.progress, t.message,
                t.attempts, t.created_at, t.updated_at, {IS_START_SQL}
         FROM tasks t JOIN users u ON u.id = t.requester_id
         WHERE ({cond}) AND {machine}
         ORDER BY t.id DESC LIMIT ?3"
    );
    (sql, bind)
}

#[cfg(test)]
mod tests {
    use super::GpuIndexes;

    #[test]
    fn gpu_indexes_read_ascending_from_the_list() {
        assert_eq!(GpuIndexes::from("3,1".to_string()), GpuIndexes(vec![1, 3]));
        assert_eq!(GpuIndexes::from(String::new()), GpuIndexes(vec![]));
    }
}
