//! What users see of compute tasks: their group's (admins: all), with the
//! decision that placed them or keeps them waiting.

use crate::{accounts::User, db::Pool, machines::visibility, PlatformError};
use gantry_core::task::TaskState;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct ComputeTaskView {
    pub id: i64,
    pub name: String,
    pub requester: String,
    pub framework: String,
    pub framework_version: String,
    pub interpreter: String,
    pub interpreter_version: String,
    /// JSON argv.
    pub command: String,
    pub gpu_count: i64,
    pub gpu_model: Option<String>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
    pub time_limit_secs: i64,
    #[sqlx(try_from = "String")]
    pub state: TaskState,
    pub message: String,
    /// JSON `gantry_core::matching::Decision`, once decided.
    pub decision: Option<String>,
    pub region: Option<String>,
    pub image: Option<String>,
    pub machine_id: Option<i64>,
    pub node: Option<String>,
    pub exit_code: Option<i64>,
    pub logs_tail: String,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

impl ComputeTaskView {
    /// "PyTorch 2.4 · Python 3.11".
    pub fn combo_label(&self) -> String {
        crate::catalogue::combo_label(
            &self.framework,
            &self.framework_version,
            &self.interpreter,
            &self.interpreter_version,
        )
    }
}

/// How much of each task's kept output a list carries (characters, from the end).
pub const LIST_TAIL_CHARS: usize = 2048;

/// [`SELECT`] for lists: each task with only the end of its kept output.
pub(super) fn list_select() -> String {
    SELECT.replacen("c.logs_tail,", &format!("substr(c.logs_tail, -{LIST_TAIL_CHARS}) AS logs_tail,"), 1)
}

/// The tasks' columns and joins (`c` the task).
pub(super) const SELECT: &str = "SELECT c.id, c.name, u.username AS requester, c.framework, c.framework_version, c.interpreter, c.interpreter_version,
           c.command, c.gpu_count, c.gpu_model, c.cpu_millis, c.memory_mb, c.time_limit_secs, c.state, c.message, c.decision,
           r.code AS region, ri.reference AS image, c.machine_id, n.name AS node, c.exit_code, c.logs_tail, c.created_at, c.started_at, c.finished_at
    FROM compute_tasks c JOIN users u ON u.id = c.requester_id
    LEFT JOIN regions r ON r.id = c.region_id LEFT JOIN region_images ri ON ri.id = c.region_image_id
    LEFT JOIN machines m ON m.id = c.machine_id LEFT JOIN nodes n ON n.id = m.node_id";

/// At most `limit` of the tasks `viewer` may see, newest first, older than
/// task `before` when given (the API's pages: a script passes the last id
/// it has). `c.id < ?` is a range on the index walked, so a page deep in
/// the list costs what the first does.
/// Each listed task carries only the end of its kept output
/// ([`LIST_TAIL_CHARS`]): 500 whole 64 KiB tails are tens of MB in one
/// answer, built in memory. The task's own answer has it whole.
pub async fn list_compute_tasks(
    pool: &Pool,
    viewer: &User,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<ComputeTaskView>, PlatformError> {
    let (cond, bind) = visibility(viewer, "c.group_id");
    Ok(sqlx::query_as(&format!("{} WHERE ({cond}) AND c.id < ? ORDER BY c.id DESC LIMIT ?", list_select()))
        .bind(bind)
        .bind(before.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(pool)
        .await?)
}

/// One task; another group's is "not found".
pub async fn compute_task(pool: &Pool, viewer: &User, id: i64) -> Result<ComputeTaskView, PlatformError> {
    let (cond, bind) = visibility(viewer, "c.group_id");
    sqlx::query_as(&format!("{SELECT} WHERE c.id = ? AND ({cond})"))
        .bind(id)
        .bind(bind)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| PlatformError::NotFound("compute task".into()))
}
