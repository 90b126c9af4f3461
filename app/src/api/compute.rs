//! Compute tasks for the signed-in user (PRODUCT B4): the form's choices,
//! submit, one task with its decision in words and its output, and
//! cancel (the list is `super::lists::compute_window`). Who sees what is
//! the platform's rule (own group; admins all).

use crate::error::AppError;
use gantry_core::matching::Decision;
use gantry_platform::{accounts::QuotaView, compute::ComputeTaskView};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// Lines of live output read from a running task's container.
pub const LIVE_OUTPUT_LINES: usize = 200;

/// A framework + interpreter combination the form offers; the value sent
/// is a master image id, whose four fields the server submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameworkChoice {
    pub master_image_id: i64,
    pub label: String,
    /// Whether any region image is linked (else the task would be refused).
    pub linked: bool,
}

/// The submission form's choices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeOptions {
    pub frameworks: Vec<FrameworkChoice>,
    pub gpu_models: Vec<String>,
    pub quota: QuotaView,
}

/// One task's page: the task, its command and decision read from their
/// JSON, and its output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeDetail {
    pub task: ComputeTaskView,
    pub command: Vec<String>,
    /// The matcher's recorded decision, once decided.
    pub decision: Option<Decision>,
    /// The container's latest lines while it runs, else the kept tail.
    pub output: String,
    /// Whether `output` was read from the running container just now.
    pub output_live: bool,
    /// The machine's whole log as text, while the job's container exists.
    pub log_url: Option<String>,
}

/// Framework + interpreter combinations from the master image catalogue
/// (one entry per combination, preferring a master image with region
/// images linked), the GPU models this group may use, and its quota.
#[server(name = GetComputeOptions, prefix = "/api", endpoint = "compute_options")]
pub async fn compute_options() -> Result<ComputeOptions, AppError> {
    use gantry_platform::{catalogue, cluster, policy};
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    let mut frameworks: Vec<FrameworkChoice> = Vec::new();
    for m in catalogue::list_master_images(&pool).await? {
        // The matcher compares the four fields without regard to case.
        let label = m.combo_label();
        let linked = !m.links.is_empty();
        match frameworks.iter_mut().find(|f| f.label.eq_ignore_ascii_case(&label)) {
            Some(f) if linked && !f.linked => *f = FrameworkChoice { master_image_id: m.id, label, linked },
            Some(_) => {}
            None => frameworks.push(FrameworkChoice { master_image_id: m.id, label, linked }),
        }
    }
    frameworks.sort_by_key(|f| f.label.to_lowercase());
    let allowed = policy::allowed_models(&pool, user.group_id).await?;
    let gpu_models =
        cluster::gpu_models(&pool).await?.into_iter().filter(|m| allowed.is_empty() || allowed.contains(m)).collect();
    Ok(ComputeOptions {
        frameworks,
        gpu_models,
        // The group's quota came with the request's user (no query of its own).
        quota: crate::api::dashboard::my_quota().await?,
    })
}

/// Submits a task; the matcher decides at once, so the answer is already
/// scheduled, pending (with the reason) or failed ("no image matches …").
/// A plain HTML form post (no JavaScript) is sent on to the task's page.
// Each argument is one field of the HTML form, named as the form names it.
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/api", endpoint = "submit_compute")]
pub async fn submit_compute(
    name: String,
    master_image_id: String,
    command: String,
    shell: Option<String>,
    gpu_count: String,
    gpu_model: Option<String>,
    cpus: Option<String>,
    memory_mb: Option<String>,
    time_limit: String,
    time_unit: Option<String>,
    datasets: Option<String>,
) -> Result<ComputeTaskView, AppError> {
    use crate::model::{
        catalogue::parse_choice,
        compute::{self as m, CommandInput},
        machines::{checkbox, parse_cpus, parse_memory_mb},
    };
    use gantry_platform::compute::{self, Command, SubmitCompute as Submission};
    let user = crate::state::auth()?;
    let invalid = |msg: String| AppError::Invalid(msg).respond();
    let opt = |f: &Option<String>| f.as_deref().unwrap_or("").to_string();
    let name = m::parse_task_name(&name).map_err(invalid)?;
    let master_id = parse_choice("a framework and interpreter", &master_image_id).map_err(invalid)?;
    let command = match m::parse_command(&command, checkbox(shell.as_deref())).map_err(invalid)? {
        CommandInput::Argv(argv) => Command::Argv(argv),
        CommandInput::Shell(script) => Command::Shell(script),
    };
    let gpu_count = m::parse_gpu_count(&gpu_count).map_err(invalid)?;
    let cpu_millis = parse_cpus(&opt(&cpus)).map_err(invalid)?.unwrap_or(m::DEFAULT_COMPUTE_CPU_MILLIS);
    let memory_mb = parse_memory_mb(&opt(&memory_mb)).map_err(invalid)?.unwrap_or(m::DEFAULT_COMPUTE_MEMORY_MB);
    let time_limit_secs = m::parse_time_limit(&time_limit, &opt(&time_unit)).map_err(invalid)?;
    let pool = crate::state::pool()?;
    let master = gantry_platform::catalogue::list_master_images(&pool)
        .await?
        .into_iter()
        .find(|x| x.id == master_id)
        .ok_or_else(|| invalid("choose a framework and interpreter from the list".into()))?;
    let datasets = crate::api::datasets::mounts_for(&user, datasets.as_deref()).await?;
    let req = Submission {
        name,
        framework: master.framework,
        framework_version: master.framework_version,
        interpreter: master.interpreter,
        interpreter_version: master.interpreter_version,
        command,
        gpu_count,
        gpu_model: m::parse_gpu_model(&opt(&gpu_model)),
        cpu_millis,
        memory_mb,
        time_limit_secs,
        datasets,
    };
    let task = compute::submit(&pool, &crate::state::admissions()?, &user, &req).await?;
    crate::state::wake_dispatcher();
    if form_post() {
        leptos_axum::redirect(&format!("/compute/{}", task.id));
    }
    Ok(task)
}

/// One task. While it runs, its output is read from the container (for
/// its submitter and admins, as the machine's own log is); otherwise it is
/// the tail kept when it ended.
#[server(name = GetComputeDetail, prefix = "/api", endpoint = "compute_detail")]
pub async fn compute_detail(id: i64) -> Result<ComputeDetail, AppError> {
    use gantry_core::task::TaskState;
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    let t = gantry_platform::compute::compute_task(&pool, &user, id).await?;
    let command: Vec<String> = serde_json::from_str(&t.command).unwrap_or_default();
    let decision = t.decision.as_deref().and_then(|d| serde_json::from_str::<Decision>(d).ok());
    let running = t.state == TaskState::Running && t.exit_code.is_none();
    let live = match (running, t.machine_id) {
        (true, Some(machine)) => live_output(&pool, &user, machine).await,
        _ => None,
    };
    let log_url =
        (running && live.is_some()).then(|| t.machine_id.map(|m| format!("/machines/{m}/logs?tail=all"))).flatten();
    let (output, output_live) = match live {
        Some(text) => (text, true),
        None => (t.logs_tail.clone(), false),
    };
    Ok(ComputeDetail { task: t, command, decision, output, output_live, log_url })
}

/// Cancels a task of the requester (or any, for an admin): a pending one at
/// once; a scheduled or running one is stopped by the watcher.
#[server(prefix = "/api", endpoint = "cancel_compute")]
pub async fn cancel_compute(task_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    gantry_platform::compute::cancel(&crate::state::pool()?, &user, task_id).await?;
    crate::state::wake_dispatcher();
    Ok(task_id)
}

/// The running job container's last lines, when this user may read the
/// machine's log and the engine answers; `None` means "show the kept tail".
async fn live_output(
    pool: &gantry_platform::db::Pool,
    user: &gantry_platform::accounts::User,
    machine_id: i64,
) -> Option<String> {
    let target = gantry_platform::workspace::target(pool, user, machine_id).await.ok()?.ok()?;
    let (container, node) = target.require_container().ok()?;
    let exec = crate::state::fleet().ok()?.executor(pool, node).await.ok()?;
    exec.output_tail(container, LIVE_OUTPUT_LINES).await.ok()
}

/// Whether this request is a plain HTML form post (JavaScript off).
pub(crate) fn form_post() -> bool {
    use_context::<http::request::Parts>().is_some_and(|p| {
        p.headers.get(http::header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html"))
    })
}
