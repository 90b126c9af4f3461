//! `/api/v1/compute-tasks`: submit, list, read, follow and cancel compute
//! tasks, as the Compute pages do. Group isolation is the platform's:
//! another group's task is 404, exactly as in the portal.

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
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use gantry_platform::{
    compute::{self, Command, ComputeTaskView, SubmitCompute},
    datasets::{mounts, Datasets},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A task as the API shows it: the row, with the command and the decision
/// as JSON rather than strings holding JSON — each key once. (A flattened
/// struct wrote the row's string fields and these both, and strict JSON
/// readers refuse an object with a key twice.)
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct TaskJson(serde_json::Value);

impl From<ComputeTaskView> for TaskJson {
    fn from(task: ComputeTaskView) -> Self {
        let decision =
            task.decision.as_deref().and_then(|d| serde_json::from_str(d).ok()).unwrap_or(serde_json::Value::Null);
        let command: serde_json::Value = serde_json::from_str(&task.command).unwrap_or_default();
        let mut row = serde_json::to_value(&task).unwrap_or_default();
        if let Some(fields) = row.as_object_mut() {
            fields.insert("decision".into(), decision);
            fields.insert("command".into(), command);
        }
        TaskJson(row)
    }
}

/// Most tasks one list answer holds (and how many without `limit`).
const LIST_MAX: i64 = 500;

/// `?limit=N&before=ID`: the next page is `before=` the last id received.
/// Raw strings, checked here, so a bad value is the API's JSON 400.
#[derive(Deserialize)]
pub struct ListParams {
    limit: Option<String>,
    before: Option<String>,
}

impl ListParams {
    fn parse(&self) -> Result<(Option<i64>, i64), ApiError> {
        let bad = ApiError::bad_request;
        let limit = match self.limit.as_deref() {
            None => LIST_MAX,
            Some(v) => v
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=LIST_MAX).contains(n))
                .ok_or_else(|| bad(format!("limit must be a whole number from 1 to {LIST_MAX}")))?,
        };
        let before = match self.before.as_deref() {
            None => None,
            Some(v) => Some(v.trim().parse().map_err(|_| bad("before must be a task id (a whole number)".into()))?),
        };
        Ok((before, limit))
    }
}

/// The tasks this token's user may see, newest first: a JSON array, as
/// before paging came (no parameters: the newest 500).
#[utoipa::path(get, path = "/api/v1/compute-tasks", tag = "compute",
    params(("limit" = Option<i64>, Query), ("before" = Option<i64>, Query)),
    responses((status = 200, body = Vec<TaskJson>), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn list(
    caller: Caller,
    State(state): State<AppState>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<Vec<TaskJson>>, ApiError> {
    let user = caller.user;
    let Query(params) =
        params.map_err(|_| ApiError::bad_request("the query string must be at most one limit=N and one before=ID"))?;
    let (before, limit) = params.parse()?;
    let tasks = compute::list_compute_tasks(&state.pool, &user, before, limit).await?;
    Ok(Json(tasks.into_iter().map(TaskJson::from).collect()))
}

/// One compute task, with its decision.
#[utoipa::path(get, path = "/api/v1/compute-tasks/{id}", tag = "compute", params(("id" = i64, Path)),
    responses((status = 200, body = TaskJson), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn one(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<TaskJson>, ApiError> {
    let user = caller.user;
    let id = task_id(id)?;
    Ok(Json(compute::compute_task(&state.pool, &user, id).await?.into()))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    name: String,
    framework: String,
    framework_version: String,
    interpreter: String,
    interpreter_version: String,
    /// An argv…
    command: Option<Vec<String>>,
    /// …or a script for `/bin/sh -c`.
    shell: Option<String>,
    gpus: u32,
    /// Matched exactly; a model no GPU of the cluster has is refused (400).
    gpu_model: Option<String>,
    #[serde(default = "one_cpu")]
    cpus: f64,
    #[serde(default = "a_gigabyte")]
    memory_mb: i64,
    #[serde(default = "an_hour")]
    time_limit_secs: i64,
    /// Sealed dataset versions to mount read-only, `["code/version", …]`;
    /// each appears at `/datasets/code/version`.
    #[serde(default)]
    datasets: Vec<String>,
}

fn one_cpu() -> f64 {
    1.0
}
fn a_gigabyte() -> i64 {
    1024
}
fn an_hour() -> i64 {
    3600
}

/// Submits a compute task: placed at once, or waiting with the reason, or
/// failed with it (in the answer's `decision` and `message`).
#[utoipa::path(post, path = "/api/v1/compute-tasks", tag = "compute", request_body = Submission,
    responses((status = 201, body = TaskJson), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn submit(
    caller: Caller,
    State(state): State<AppState>,
    stores: Option<Extension<Datasets>>,
    body: Result<Json<Submission>, JsonRejection>,
) -> Result<Response, ApiError> {
    let user = caller.user;
    let Json(s) = body.map_err(|e| ApiError::body(e, "a compute task"))?;
    let command = match (s.command, s.shell) {
        (Some(argv), None) => Command::Argv(argv),
        (None, Some(script)) => Command::Shell(script),
        _ => return Err(ApiError::bad_request("give exactly one of \"command\" (an argv) or \"shell\" (a script)")),
    };
    // In CPUs, as the caller wrote them (the platform's check counts
    // thousandths: "between 100 and 256000" read as CPUs is 1,000 times off).
    if !s.cpus.is_finite() || !(0.1..=256.0).contains(&s.cpus) {
        return Err(ApiError::bad_request("cpus must be a number between 0.1 and 256"));
    }
    if s.datasets.iter().any(|d| d.contains(',') || d.trim().is_empty()) {
        return Err(ApiError::bad_request("each entry of \"datasets\" is one dataset-code/version"));
    }
    let datasets =
        mounts::resolve_named(&state.pool, stores.as_ref().map(|e| &e.0), &user, &s.datasets.join(",")).await?;
    let req = SubmitCompute {
        name: s.name,
        framework: s.framework,
        framework_version: s.framework_version,
        interpreter: s.interpreter,
        interpreter_version: s.interpreter_version,
        command,
        gpu_count: s.gpus,
        gpu_model: s.gpu_model.filter(|m| !m.trim().is_empty()),
        cpu_millis: (s.cpus * 1000.0).round() as i64,
        memory_mb: s.memory_mb,
        time_limit_secs: s.time_limit_secs,
        datasets,
    };
    let task = compute::submit(&state.pool, &state.admissions, &user, &req).await?;
    state.dispatch.notify_one();
    Ok((StatusCode::CREATED, Json(TaskJson::from(task))).into_response())
}

/// A task id from the path; anything else is the API's JSON 400 — after
/// the token is checked, so a caller without one learns only that (401).
fn task_id(id: Result<Path<i64>, PathRejection>) -> Result<i64, ApiError> {
    id.map(|Path(id)| id)
        .map_err(|_| ApiError::bad_request("a task id is a whole number (as in /api/v1/compute-tasks/7)"))
}

/// The output (text): live from the container while the task runs, else
/// what was kept when it ended.
#[utoipa::path(get, path = "/api/v1/compute-tasks/{id}/logs", tag = "compute", params(("id" = i64, Path)),
    responses((status = 200, body = String, content_type = "text/plain"), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn logs(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Response, ApiError> {
    let user = caller.user;
    let id = task_id(id)?;
    let text = compute::output(&state.pool, &state.fleet, &user, id).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// Cancels a compute task (its submitter or an admin).
#[utoipa::path(post, path = "/api/v1/compute-tasks/{id}/cancel", tag = "compute", params(("id" = i64, Path)),
    responses((status = 200, body = TaskJson), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn cancel(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<TaskJson>, ApiError> {
    let user = caller.user;
    let id = task_id(id)?;
    compute::cancel(&state.pool, &user, id).await?;
    Ok(Json(compute::compute_task(&state.pool, &user, id).await?.into()))
}
