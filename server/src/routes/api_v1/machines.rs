//! `/api/v1/machines` and `/api/v1/tasks/{id}`: dev machines for scripts,
//! through exactly the functions the machine pages' server functions call
//! (`app/src/api/machines.rs`, `snapshots.rs`, `reclaim.rs`): the same
//! parsing of the create form, the same admission, the same operations
//! and refusals. Who sees what is the platform's rule (own group; admins
//! everything): another group's machine is 404 here as on its page. What
//! starts a task answers 202 with the task's id, to follow at
//! `GET /api/v1/tasks/{id}`.

use super::{
    caller::Caller,
    errors::{ApiError, ErrorBody},
};
use app::state::AppState;
use axum::{
    extract::{
        rejection::{JsonRejection, PathRejection, QueryRejection},
        Extension, Path, Query, State,
    },
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use gantry_core::task::TaskKind;
use gantry_platform::{
    datasets::{mounts, Datasets},
    machines::{self, CreateMachine, MachineView, OperationRequest, TaskView},
    reclaim, snapshots,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A machine as the API shows it (the machines page's columns).
#[derive(Serialize, ToSchema)]
pub struct MachineJson {
    pub id: i64,
    pub name: String,
    /// `creating`, `running`, `stopped`, `reclaimed`, `failed`, … (see `shut_down`).
    pub state: String,
    /// Put away by its owner's stop: `state` is then `reclaimed`; `start` brings it back.
    pub shut_down: bool,
    pub image: String,
    pub gpus: i64,
    pub gpu_model: String,
    pub gpu_indexes: Vec<u32>,
    pub node: Option<String>,
    pub group: String,
    pub owner: String,
    pub cpu_millis: i64,
    pub memory_mb: i64,
    pub volume_size_gb: i64,
    pub message: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<MachineView> for MachineJson {
    fn from(m: MachineView) -> Self {
        MachineJson {
            id: m.id,
            state: m.state.as_str().to_string(),
            shut_down: m.shut_down,
            gpu_indexes: m.gpu_indexes.0.clone(),
            name: m.name,
            image: m.image,
            gpus: m.gpu_count,
            gpu_model: m.gpu_model,
            node: m.node,
            group: m.group_name,
            owner: m.owner,
            cpu_millis: m.cpu_millis,
            memory_mb: m.memory_mb,
            volume_size_gb: m.volume_size_gb,
            message: m.message,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct MachineList {
    pub machines: Vec<MachineJson>,
}

/// A task (create, restart, stop, snapshot, …) as the task list shows it.
#[derive(Serialize, ToSchema)]
pub struct TaskJson {
    pub id: i64,
    pub kind: String,
    pub machine_id: Option<i64>,
    pub machine_name: String,
    pub requester: String,
    /// `pending`, `scheduled`, `running`, `succeeded`, `failed`, `cancelled`.
    pub state: String,
    pub progress: i64,
    pub message: String,
    pub attempts: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<TaskView> for TaskJson {
    fn from(t: TaskView) -> Self {
        TaskJson {
            id: t.id,
            kind: t.kind.as_str().to_string(),
            state: t.state.as_str().to_string(),
            machine_id: t.machine_id,
            machine_name: t.machine_name,
            requester: t.requester,
            progress: t.progress,
            message: t.message,
            attempts: t.attempts,
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

/// A machine's page: the machine, whether the caller may operate it, its tasks.
#[derive(Serialize, ToSchema)]
pub struct MachineDetail {
    pub machine: MachineJson,
    /// Its owner or an admin (a group member only looks).
    pub may_operate: bool,
    /// Newest first, at most 100.
    pub tasks: Vec<TaskJson>,
}

/// The create form's fields. Absent image, model, CPUs, memory, volume
/// size: the form's defaults.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMachine {
    pub name: String,
    pub image_id: Option<i64>,
    pub gpus: i64,
    pub gpu_model: Option<String>,
    pub volume_size_gb: Option<i64>,
    /// CPUs, e.g. 2 or 0.5 (at most three decimals).
    pub cpus: Option<f64>,
    pub memory_mb: Option<i64>,
    /// Create the machine on one of the group's kept volumes.
    pub kept_volume_id: Option<i64>,
    /// Sealed dataset versions to mount read-only, `["code/version", …]`.
    #[serde(default)]
    pub datasets: Vec<String>,
}

/// What admission answered: where the machine goes, and its create task.
#[derive(Serialize, ToSchema)]
pub struct CreatedMachine {
    pub machine_id: i64,
    pub task_id: i64,
    pub name: String,
    pub node: String,
    pub gpu_indexes: Vec<u32>,
    pub model: String,
}

#[derive(Serialize, ToSchema)]
pub struct TaskStarted {
    pub task_id: i64,
}

#[derive(Serialize, ToSchema)]
pub struct SnapshotStarted {
    pub task_id: i64,
    pub snapshot_id: i64,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    pub name: String,
}

/// Restore a reclaimed machine (no body), or reinstall it from one of its snapshots.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    pub snapshot_id: Option<i64>,
}

#[derive(Deserialize)]
pub struct DeleteQuery {
    keep_volume: Option<String>,
}

fn machine_id(id: Result<Path<i64>, PathRejection>) -> Result<i64, ApiError> {
    id.map(|Path(id)| id).map_err(|e| ApiError::path(e, "/api/v1/machines/7"))
}

fn started(task_id: i64) -> Response {
    (StatusCode::ACCEPTED, Json(TaskStarted { task_id })).into_response()
}

/// The caller's machines (own group; admins all), newest first.
#[utoipa::path(get, path = "/api/v1/machines", tag = "machines",
    responses((status = 200, body = MachineList), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn list(caller: Caller, State(state): State<AppState>) -> Result<Json<MachineList>, ApiError> {
    let list = machines::list_machines(&state.pool, &caller.user).await?;
    Ok(Json(MachineList { machines: list.into_iter().map(MachineJson::from).collect() }))
}

/// Creates a machine as the create form does: admitted within the group's
/// quota at once (a refusal is 409 `refused` with the numbers).
#[utoipa::path(post, path = "/api/v1/machines", tag = "machines", request_body = NewMachine,
    responses((status = 202, body = CreatedMachine), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn create(
    caller: Caller,
    State(state): State<AppState>,
    stores: Option<Extension<Datasets>>,
    body: Result<Json<NewMachine>, JsonRejection>,
) -> Result<Response, ApiError> {
    use app::model::machines::{parse_cpus, parse_create, parse_memory_mb};
    let Json(m) = body.map_err(|e| ApiError::body(e, "a machine"))?;
    let text = |v: Option<String>| v.unwrap_or_default();
    // The form's own parsing, on the form's text: the same checks and words.
    let input = parse_create(
        &m.name,
        &text(m.image_id.map(|i| i.to_string())),
        &m.gpus.to_string(),
        m.gpu_model.as_deref().unwrap_or(""),
        &text(m.volume_size_gb.map(|v| v.to_string())),
    )
    .map_err(ApiError::bad_request)?;
    let cpus = match m.cpus {
        Some(c) if !c.is_finite() => return Err(ApiError::bad_request("cpus must be a number such as 2 or 0.5")),
        c => text(c.map(|c| c.to_string())),
    };
    let cpu_millis = parse_cpus(&cpus).map_err(ApiError::bad_request)?;
    let memory_mb = parse_memory_mb(&text(m.memory_mb.map(|v| v.to_string()))).map_err(ApiError::bad_request)?;
    if m.datasets.iter().any(|d| d.contains(',') || d.trim().is_empty()) {
        return Err(ApiError::bad_request("each entry of \"datasets\" is one dataset-code/version"));
    }
    let user = caller.user;
    let datasets =
        mounts::resolve_named(&state.pool, stores.as_ref().map(|e| &e.0), &user, &m.datasets.join(",")).await?;
    let admitted = state
        .admissions
        .create(CreateMachine {
            requester: user,
            name: input.name.clone(),
            image_id: input.image_id,
            gpu_count: input.gpu_count,
            gpu_model: input.gpu_model,
            volume_size_gb: input.volume_size_gb,
            cpu_millis,
            memory_mb,
            kept_volume_id: m.kept_volume_id,
            job: None,
            datasets,
        })
        .await?;
    state.dispatch.notify_one();
    let created = CreatedMachine {
        machine_id: admitted.machine_id,
        task_id: admitted.task_id,
        name: input.name,
        node: admitted.node_name,
        gpu_indexes: admitted.gpu_indexes,
        model: admitted.model,
    };
    Ok((StatusCode::ACCEPTED, Json(created)).into_response())
}

/// One machine, whether the caller may operate it, and its tasks.
#[utoipa::path(get, path = "/api/v1/machines/{id}", tag = "machines", params(("id" = i64, Path)),
    responses((status = 200, body = MachineDetail), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn one(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<MachineDetail>, ApiError> {
    let id = machine_id(id)?;
    let machine = machines::machine_detail(&state.pool, &caller.user, id).await?;
    let tasks = machines::list_tasks(&state.pool, &caller.user, Some(id), 100).await?;
    Ok(Json(MachineDetail {
        may_operate: machine.may_operate(&caller.user),
        machine: machine.into(),
        tasks: tasks.into_iter().map(TaskJson::from).collect(),
    }))
}

async fn operation(
    caller: &Caller,
    state: &AppState,
    machine_id: i64,
    kind: TaskKind,
    keep: bool,
) -> Result<Response, ApiError> {
    let op = OperationRequest { machine_id, kind, keep_volume: kind == TaskKind::Delete && keep };
    let task = machines::request_operation(&state.pool, &caller.user, op).await?;
    state.dispatch.notify_one();
    Ok(started(task))
}

/// Restarts the machine's container (the page's Restart).
#[utoipa::path(post, path = "/api/v1/machines/{id}/restart", tag = "machines", params(("id" = i64, Path)),
    responses((status = 202, body = TaskStarted), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn restart(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Response, ApiError> {
    operation(&caller, &state, machine_id(id)?, TaskKind::Restart, false).await
}

/// Reinstalls the machine from its image, keeping /data (the page's Reinstall).
#[utoipa::path(post, path = "/api/v1/machines/{id}/reinstall", tag = "machines", params(("id" = i64, Path)),
    responses((status = 202, body = TaskStarted), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn reinstall(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Response, ApiError> {
    operation(&caller, &state, machine_id(id)?, TaskKind::Reinstall, false).await
}

/// Deletes the machine; `?keep_volume=true` keeps its data volume.
#[utoipa::path(delete, path = "/api/v1/machines/{id}", tag = "machines",
    params(("id" = i64, Path), ("keep_volume" = Option<bool>, Query)),
    responses((status = 202, body = TaskStarted), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn delete(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    query: Result<Query<DeleteQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let id = machine_id(id)?;
    let Query(q) = query.map_err(ApiError::query)?;
    let keep = app::model::machines::checkbox(q.keep_volume.as_deref());
    operation(&caller, &state, id, TaskKind::Delete, keep).await
}

/// Stops the machine: its filesystem is saved, its GPUs go back at once.
#[utoipa::path(post, path = "/api/v1/machines/{id}/stop", tag = "machines", params(("id" = i64, Path)),
    responses((status = 202, body = TaskStarted), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn stop(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Response, ApiError> {
    let task = reclaim::stop(&state.pool, &caller.user, machine_id(id)?).await?;
    state.dispatch.notify_one();
    Ok(started(task))
}

/// Snapshots the machine's filesystem under a name.
#[utoipa::path(post, path = "/api/v1/machines/{id}/snapshot", tag = "machines", params(("id" = i64, Path)),
    request_body = SnapshotRequest,
    responses((status = 202, body = SnapshotStarted), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn snapshot(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    body: Result<Json<SnapshotRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let id = machine_id(id)?;
    let Json(req) = body.map_err(|e| ApiError::body(e, "{\"name\": …}"))?;
    let (snapshot_id, task_id) = snapshots::request(&state.pool, &caller.user, id, &req.name).await?;
    state.dispatch.notify_one();
    Ok((StatusCode::ACCEPTED, Json(SnapshotStarted { task_id, snapshot_id })).into_response())
}

/// Restores a reclaimed machine; with `{"snapshot_id": N}`, reinstalls it
/// from that snapshot instead.
#[utoipa::path(post, path = "/api/v1/machines/{id}/restore", tag = "machines", params(("id" = i64, Path)),
    request_body(content = RestoreRequest, description = "optional"),
    responses((status = 202, body = TaskStarted), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn restore(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let id = machine_id(id)?;
    let req: RestoreRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RestoreRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body must be empty or {{\"snapshot_id\": N}}: {e}")))?
    };
    let task = match req.snapshot_id {
        None => reclaim::restore(&state.pool, &caller.user, id).await?,
        Some(snapshot) => snapshots::reinstall_from(&state.pool, &caller.user, id, snapshot).await?,
    };
    state.dispatch.notify_one();
    Ok(started(task))
}

/// One task of a machine (create, restart, stop, …) that the caller may see.
#[utoipa::path(get, path = "/api/v1/tasks/{id}", tag = "machines", params(("id" = i64, Path)),
    responses((status = 200, body = TaskJson), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn task(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<TaskJson>, ApiError> {
    let id = id.map(|Path(id)| id).map_err(|e| ApiError::path(e, "/api/v1/tasks/7"))?;
    // The task list's own query and visibility rule, for one id.
    let (cond, bind) = machines::visibility(&caller.user, "t.group_id");
    let sql = format!(
        "SELECT t.id, t.kind, t.machine_id, t.machine_name, u.username AS requester, t.state, t.progress, t.message,
                t.attempts, t.created_at, t.updated_at
         FROM tasks t JOIN users u ON u.id = t.requester_id WHERE t.id = ? AND ({cond})"
    );
    let task: Option<TaskView> = sqlx::query_as(&sql)
        .bind(id)
        .bind(bind)
        .fetch_optional(&state.pool)
        .await
        .map_err(gantry_platform::PlatformError::from)?;
    task.map(|t| Json(t.into())).ok_or_else(|| ApiError::not_found("task not found"))
}
