//! Compute tasks (PRODUCT B4): submitted with framework, interpreter,
//! command and resources; matched to a region by the core
//! (`gantry_core::matching`); run as a machine of workload `job` through
//! the same quota-checked admission, dispatcher and transitions as dev
//! machines; watched to their end.

mod listing;
mod matcher;
mod rules;
mod size;
mod views;
mod watch;

pub use listing::{compute_ids_sql, compute_window};
pub(crate) use matcher::has_container_sql;
pub use matcher::{evaluate_queue, evaluate_queue_seeded, snapshot, Snapshot};
pub use views::{compute_task, list_compute_tasks, ComputeTaskView, LIST_TAIL_CHARS};
pub use watch::{run_loops, watch_once};

use crate::{
    accounts::User,
    db::Pool,
    transitions::{self, compute::NewCompute},
    PlatformError,
};
use gantry_core::{task::TaskState, validate};

/// How the command is given: an argv, or a script for `/bin/sh -c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Argv(Vec<String>),
    Shell(String),
}

#[derive(Debug, Clone)]
pub struct SubmitCompute {
    pub name: String,
    pub framework: String,
    pub framework_version: String,
    pub interpreter: String,
    pub interpreter_version: String,
    pub command: Command,
    pub gpu_count: u32,
    pub gpu_model: Option<String>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
    pub time_limit_secs: i64,
    /// Sealed dataset versions to mount read-only, already resolved for the
    /// requester (`datasets::mounts::resolve`).
    pub datasets: Vec<crate::datasets::mounts::DatasetMount>,
}

/// Longest time limit: a week.
pub const TIME_LIMIT_MAX: i64 = 7 * 24 * 3600;

fn field(name: &str, value: &str) -> Result<(), PlatformError> {
    let v = value.trim();
    if v.is_empty() || v.len() > 32 || v.chars().any(char::is_control) {
        return Err(PlatformError::BadRequest(format!("{name} must be 1 to 32 printable characters")));
    }
    Ok(())
}

/// A GPU model name: up to 64 (`policy::MODEL_NAME_MAX`), as admission —
/// which the task's machine goes through —, the admin nodes page and a
/// group's allowed models take; GPUs report names past 32 ("NVIDIA RTX PRO
/// 6000 Blackwell Server Edition"). Counted in bytes as admission counts
/// them (the names GPUs report are ASCII), so a task accepted here is never
/// refused there for its model's name.
fn gpu_model(value: &str) -> Result<(), PlatformError> {
    let max = crate::policy::MODEL_NAME_MAX;
    let v = value.trim();
    if v.is_empty() || v.len() > max || v.chars().any(char::is_control) {
        return Err(PlatformError::BadRequest(format!("GPU model must be 1 to {max} printable characters")));
    }
    Ok(())
}

/// Arguments a task's command may have (with the program).
const MAX_ARGS: usize = 1024;

impl SubmitCompute {
    /// Input rules; nothing is written when one fails.
    fn argv(&self) -> Result<Vec<String>, PlatformError> {
        validate::name("task name", &self.name)?;
        field("framework", &self.framework)?;
        field("framework version", &self.framework_version)?;
        field("interpreter", &self.interpreter)?;
        field("interpreter version", &self.interpreter_version)?;
        validate::in_range("GPU count", self.gpu_count as i64, 1, 64)?;
        validate::in_range("CPU (thousandths)", self.cpu_millis, 100, 256_000)?;
        validate::in_range("memory (MB)", self.memory_mb, 64, 4 * 1024 * 1024)?;
        validate::in_range("time limit (s)", self.time_limit_secs, 1, TIME_LIMIT_MAX)?;
        if let Some(m) = &self.gpu_model {
            gpu_model(m)?;
        }
        let argv = match &self.command {
            Command::Argv(argv) => argv.clone(),
            Command::Shell(script) => vec!["/bin/sh".into(), "-c".into(), script.clone()],
        };
        // Counted in arguments as well as bytes: 700,000 empty strings are
        // few bytes but megabytes of JSON in every list that shows the task.
        let total: usize = argv.iter().map(String::len).sum();
        if argv.is_empty()
            || argv[0].trim().is_empty()
            || argv.len() > MAX_ARGS
            || total > 16 * 1024
            || argv.iter().any(|a| a.contains('\0'))
        {
            return Err(PlatformError::BadRequest(format!(
                "command must be a non-empty program and at most {MAX_ARGS} arguments, 16 KB at most"
            )));
        }
        Ok(argv)
    }
}

/// Records the task (`pending`) and lets the matcher decide at once; the
/// task is returned in whatever state that left it.
pub async fn submit(
    pool: &Pool,
    admissions: &crate::machines::Admissions,
    requester: &User,
    req: &SubmitCompute,
) -> Result<ComputeTaskView, PlatformError> {
    let id = record(pool, requester, req).await?;
    // The task is recorded: from here on an error (a busy database) is
    // logged, not answered — an error would make a script submit it again,
    // a duplicate — and the queue loop (every 2 s) runs these checks again.
    // A task no image can ever run, that its group's rules can never
    // admit, or that no node could hold, is failed now, wherever it would
    // queue: behind it, the group's later tasks would wait for ever.
    match reject_if_no_image(pool, id, req).await {
        Ok(true) => {}
        Ok(false) => {
            let ask = rules::Ask {
                gpus: req.gpu_count,
                gpu_model: req.gpu_model.as_deref().map(|m| m.trim().to_string()),
                cpu_millis: req.cpu_millis,
                memory_mb: req.memory_mb,
            };
            if let Err(e) = rules::fail_if_never_admitted(pool, requester, id, &ask).await {
                tracing::warn!(task = id, error = %e, "checking a new task's rules failed; the queue loop checks again");
            }
        }
        Err(e) => {
            tracing::warn!(task = id, error = %e, "checking a new task's image failed; the queue loop decides it again")
        }
    }
    if let Err(e) = evaluate_queue(pool, admissions).await {
        tracing::warn!(task = id, error = %e, "matching right after a submit failed; the queue loop tries again");
    }
    compute_task(pool, requester, id).await
}

/// `true` when the task was failed for want of an image.
async fn reject_if_no_image(pool: &Pool, id: i64, req: &SubmitCompute) -> Result<bool, PlatformError> {
    let snap = snapshot(pool).await?;
    let request = gantry_core::matching::TaskRequest {
        framework: req.framework.trim().into(),
        framework_version: req.framework_version.trim().into(),
        interpreter: req.interpreter.trim().into(),
        interpreter_version: req.interpreter_version.trim().into(),
        gpus: req.gpu_count,
        gpu_model: req.gpu_model.clone(),
        cpu_millis: req.cpu_millis,
        memory_mb: req.memory_mb,
    };
    let decision = gantry_core::matching::decide(&snap.catalogue, &[], &request, 0);
    if let gantry_core::matching::Outcome::Rejected { reason } = &decision.outcome {
        let mut tx = transitions::begin(pool).await?;
        transitions::compute::decided(
            &mut tx,
            id,
            &serde_json::to_string(&decision).unwrap_or_default(),
            None,
            Err(reason),
        )
        .await?;
        tx.commit().await?;
        return Ok(true);
    }
    Ok(false)
}

/// Validates and records the task as `pending`, for the matcher.
pub async fn record(pool: &Pool, requester: &User, req: &SubmitCompute) -> Result<i64, PlatformError> {
    let argv = req.argv()?;
    let mut tx = transitions::begin(pool).await?;
    // The account as it is now, under the write lock: a task recorded for a
    // moved or disabled account would queue in a group it left.
    if let Some(why) = crate::machines::admission::requester_changed(&mut tx, requester).await? {
        return Err(PlatformError::Refused(why));
    }
    // Models match exactly (as admission and group rules match them): a
    // model no GPU has would wait for ever, so it is refused, listing those
    // there are.
    if let Some(model) = req.gpu_model.as_deref().map(str::trim) {
        if let Some(why) = size::model_unknown(&mut tx, model).await? {
            return Err(PlatformError::BadRequest(why));
        }
    }
    // Mounts were resolved before this transaction; a version deleted since
    // would refuse every admission. Deleting one checks for pending tasks
    // under the same write lock, so once recorded the task keeps it.
    if let Some(gone) = crate::datasets::mounts::first_missing(&mut tx, &req.datasets).await? {
        return Err(PlatformError::Conflict(format!(
            "dataset version {gone} was deleted while the task was being submitted; nothing was recorded"
        )));
    }
    let id = transitions::compute::insert(
        &mut tx,
        &NewCompute {
            name: req.name.trim(),
            requester,
            framework: req.framework.trim(),
            framework_version: req.framework_version.trim(),
            interpreter: req.interpreter.trim(),
            interpreter_version: req.interpreter_version.trim(),
            command: &argv,
            gpu_count: req.gpu_count,
            gpu_model: req.gpu_model.as_deref().map(str::trim),
            cpu_millis: req.cpu_millis,
            memory_mb: req.memory_mb,
            time_limit_secs: req.time_limit_secs,
            datasets: &req.datasets,
        },
    )
    .await?;
    crate::audit::record(
        &mut *tx,
        Some(requester.id),
        "compute.submit",
        &format!("compute task #{id} {}", req.name.trim()),
    )
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// Cancels a compute task of the requester (or any, for an admin).
pub async fn cancel(pool: &Pool, who: &User, id: i64) -> Result<(), PlatformError> {
    let mut tx = transitions::begin(pool).await?;
    transitions::compute::cancel(&mut tx, who, id).await?;
    tx.commit().await?;
    Ok(())
}

/// The task's output: live from its container while it runs — for the
/// person who submitted it or an admin, as a machine's own log is — else
/// what was kept when it ended (the last 200 lines), which the group sees.
pub async fn output(pool: &Pool, fleet: &crate::fleet::Fleet, viewer: &User, id: i64) -> Result<String, PlatformError> {
    let task = compute_task(pool, viewer, id).await?;
    if task.state != TaskState::Running || (task.requester != viewer.username && !viewer.role.is_admin()) {
        return Ok(task.logs_tail);
    }
    let Some(machine_id) = task.machine_id else { return Ok(task.logs_tail) };
    let row: Option<(Option<String>, Option<i64>)> =
        sqlx::query_as("SELECT container_id, node_id FROM machines WHERE id = ?")
            .bind(machine_id)
            .fetch_optional(pool)
            .await?;
    if let Some((Some(container), Some(node))) = row {
        if let Ok(exec) = fleet.executor(pool, node).await {
            if let Ok(live) = exec.output_tail(&container, 1000).await {
                return Ok(live);
            }
        }
    }
    Ok(task.logs_tail)
}
