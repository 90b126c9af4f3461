//! Dev machines for the signed-in user: list, detail, tasks, the create
//! form's choices, create, and operations. Who sees what is decided in the
//! platform (own group; admins everything).

use crate::error::AppError;
use gantry_platform::{
    accounts::QuotaView,
    images::Image,
    machines::{KeptVolumeView, MachineView, TaskView},
};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// A machine's page: the machine, what the viewer may do, its history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineDetail {
    pub machine: MachineView,
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
    pub tasks: Vec<TaskView>,
    /// Sealed dataset versions bound read-only: (`code/version`, path inside).
    pub datasets: Vec<(String, String)>,
}

/// What the create form offers the signed-in user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateOptions {
    pub images: Vec<Image>,
    /// Models present in the cluster that the group may use.
    pub gpu_models: Vec<String>,
    pub max_gpus_per_machine: i64,
    pub quota: QuotaView,
    /// Kept volumes a new machine may be created on.
    pub kept_volumes: Vec<KeptVolumeView>,
}

/// What admission answered a create: where the machine goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedMachine {
    pub machine_id: i64,
    pub task_id: i64,
    pub name: String,
    pub node: String,
    pub gpu_indexes: Vec<u32>,
    pub model: String,
}

/// Most tasks the task list shows.
pub const TASK_LIST_LIMIT: i64 = 200;
/// Most tasks a machine's page shows.
pub const MACHINE_TASKS_LIMIT: i64 = 100;

#[server(prefix = "/api", endpoint = "my_machines")]
pub async fn my_machines() -> Result<Vec<MachineView>, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::machines::list_machines(&crate::state::pool()?, &user).await?)
}

#[server(name = GetMachineDetail, prefix = "/api", endpoint = "machine_detail")]
pub async fn machine_detail(id: i64) -> Result<MachineDetail, AppError> {
    use gantry_platform::machines;
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    let machine = machines::machine_detail(&pool, &user, id).await?;
    let tasks = machines::list_tasks(&pool, &user, Some(id), MACHINE_TASKS_LIMIT).await?;
    let datasets =
        gantry_platform::datasets::mounts::of_machine(&pool, id).await.map_err(gantry_platform::PlatformError::from)?;
    // The page offers the owner's actions only to those the platform lets act.
    let (can_operate, job, mine) = (machine.may_operate(&user), machine.is_job(), machine.owner_id == user.id);
    Ok(MachineDetail {
        machine,
        can_operate,
        job,
        mine,
        tasks,
        datasets: datasets.into_iter().map(|m| (m.name, m.target)).collect(),
    })
}

#[server(prefix = "/api", endpoint = "my_tasks")]
pub async fn my_tasks() -> Result<Vec<TaskView>, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::machines::list_tasks(&crate::state::pool()?, &user, None, TASK_LIST_LIMIT).await?)
}

/// Images, GPU models and limits the create form offers this user.
#[server(name = GetCreateOptions, prefix = "/api", endpoint = "create_options")]
pub async fn create_options() -> Result<CreateOptions, AppError> {
    use gantry_platform::{cluster, images, policy};
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    // The group's quota came with the request's user (no query of its own).
    let quota = crate::api::dashboard::my_quota().await?;
    let images = images::images_for_group(&pool, user.group_id).await?;
    let allowed = policy::allowed_models(&pool, user.group_id).await?;
    let kept = gantry_platform::machines::list_kept_volumes(&pool, &user).await?;
    let gpu_models =
        cluster::gpu_models(&pool).await?.into_iter().filter(|m| allowed.is_empty() || allowed.contains(m)).collect();
    Ok(CreateOptions {
        images,
        gpu_models,
        max_gpus_per_machine: quota.max_gpus_per_machine,
        quota,
        kept_volumes: kept,
    })
}

/// Asks for a new machine. Allocation and quota deduction happen together
/// in the admission worker; a refusal (409) names the rule and the numbers.
/// CPUs, memory and the kept volume are optional fields (empty or absent:
/// the defaults and a new volume), so older form posts still work.
// Each argument is one field of the HTML form, named as the form names it.
#[allow(clippy::too_many_arguments)]
#[server(prefix = "/api", endpoint = "create_machine")]
pub async fn create_machine(
    name: String,
    image_id: String,
    gpu_count: String,
    gpu_model: String,
    volume_size_gb: String,
    cpus: Option<String>,
    memory_mb: Option<String>,
    kept_volume_id: Option<String>,
    datasets: Option<String>,
) -> Result<CreatedMachine, AppError> {
    use crate::model::machines::{parse_cpus, parse_create, parse_kept_volume, parse_memory_mb};
    use gantry_platform::machines::CreateMachine;
    let user = crate::state::auth()?;
    let invalid = |m: String| AppError::Invalid(m).respond();
    let field = |f: &Option<String>| f.as_deref().unwrap_or("").to_string();
    let input = parse_create(&name, &image_id, &gpu_count, &gpu_model, &volume_size_gb).map_err(invalid)?;
    let cpu_millis = parse_cpus(&field(&cpus)).map_err(invalid)?;
    let memory_mb = parse_memory_mb(&field(&memory_mb)).map_err(invalid)?;
    let kept_volume_id = parse_kept_volume(&field(&kept_volume_id)).map_err(invalid)?;
    let datasets = crate::api::datasets::mounts_for(&user, datasets.as_deref()).await?;
    let admitted = crate::state::admissions()?
        .create(CreateMachine {
            requester: user,
            name: input.name.clone(),
            image_id: input.image_id,
            gpu_count: input.gpu_count,
            gpu_model: input.gpu_model,
            volume_size_gb: input.volume_size_gb,
            cpu_millis,
            memory_mb,
            kept_volume_id,
            job: None,
            datasets,
        })
        .await?;
    crate::state::wake_dispatcher();
    Ok(CreatedMachine {
        machine_id: admitted.machine_id,
        task_id: admitted.task_id,
        name: input.name,
        node: admitted.node_name,
        gpu_indexes: admitted.gpu_indexes,
        model: admitted.model,
    })
}

/// Cancels a task that has not started (pending or scheduled), for the
/// person who asked for it or an admin; a cancelled create gives its GPUs
/// back. The platform's refusal says why (e.g. the task is running).
#[server(prefix = "/api", endpoint = "cancel_task")]
pub async fn cancel_task(task_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    gantry_platform::transitions::task::cancel(&crate::state::pool()?, &user, task_id).await?;
    // A dispatcher waiting on the cancelled task's machine may go on.
    crate::state::wake_dispatcher();
    Ok(task_id)
}

/// Queues restart, reinstall or delete; returns the task id. Another
/// group's machine is "not found" (404).
#[server(prefix = "/api", endpoint = "machine_operation")]
pub async fn machine_operation(
    machine_id: i64,
    operation: String,
    keep_volume: Option<String>,
) -> Result<i64, AppError> {
    use crate::model::machines::{checkbox, parse_operation};
    use gantry_core::task::TaskKind;
    use gantry_platform::machines::{request_operation, OperationRequest};
    let user = crate::state::auth()?;
    let kind = parse_operation(&operation).map_err(|m| AppError::Invalid(m).respond())?;
    let keep_volume = kind == TaskKind::Delete && checkbox(keep_volume.as_deref());
    let task_id =
        request_operation(&crate::state::pool()?, &user, OperationRequest { machine_id, kind, keep_volume }).await?;
    crate::state::wake_dispatcher();
    Ok(task_id)
}

/// Stops a running or stopped dev machine for its owner (or an admin): its
/// filesystem is saved, its container removed and its GPUs returned; its
/// volume and name stay. Returns the task id (the same stop asked again
/// answers the first one's). Another group's machine is 404.
#[server(prefix = "/api", endpoint = "stop_machine")]
pub async fn stop_machine(machine_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    let task = gantry_platform::reclaim::stop(&crate::state::pool()?, &user, machine_id).await?;
    crate::state::wake_dispatcher();
    Ok(task)
}

/// Starts a shut-down machine: admitted on its node within the group's
/// quota like a create; a refusal (409) gives the numbers and changes
/// nothing. Returns the task id.
#[server(prefix = "/api", endpoint = "start_machine")]
pub async fn start_machine(machine_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    let task = gantry_platform::reclaim::start(&crate::state::pool()?, &user, machine_id).await?;
    crate::state::wake_dispatcher();
    Ok(task)
}
