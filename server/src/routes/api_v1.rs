//! The JSON API for scripts (`/api/v1/…`), authenticated by personal API
//! tokens (`Authorization: Bearer gnt_…`). Group isolation is the
//! platform's: another group's task is 404, exactly as in the portal.

use app::state::AppState;
use axum::{
    extract::{
        rejection::{PathRejection, QueryRejection},
        Extension, Path, Query, State,
    },
    http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri},
    response::{IntoResponse, Response},
    routing::{any, get, post},
    Json, Router,
};
use gantry_platform::{
    accounts::User,
    compute::{self, Command, ComputeTaskView, SubmitCompute},
    datasets::{mounts, DatasetError, Datasets},
    tokens, PlatformError,
};
use serde::{Deserialize, Serialize};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/compute-tasks", get(list).post(submit))
        .route("/api/v1/compute-tasks/{id}", get(one))
        .route("/api/v1/compute-tasks/{id}/logs", get(logs))
        .route("/api/v1/compute-tasks/{id}/cancel", post(cancel))
        .method_not_allowed_fallback(wrong_method)
        // Every other path under /api/v1 is the API's 404 — not a page's,
        // nor the server functions' route (`/api/{fn}`) answering 405.
        .route("/api/v1", any(no_such_path))
        .route("/api/v1/", any(no_such_path))
        .route("/api/v1/{*rest}", any(no_such_path))
}

/// A known API path asked with a method it does not take: 405 in the
/// API's shape (axum adds the route's `Allow`).
pub async fn wrong_method(method: Method, uri: Uri) -> Response {
    let message = format!("{} does not take {method}; the Allow header lists what it takes", uri.path());
    no_store(ApiError(StatusCode::METHOD_NOT_ALLOWED, message).into_response())
}

/// A path under `/api/v1` that names nothing: 404 in the API's shape.
async fn no_such_path(uri: Uri) -> Response {
    let message = format!("no such API path: {} (see the API section of the README)", uri.path());
    no_store(ApiError(StatusCode::NOT_FOUND, message).into_response())
}

/// `{"error": "…"}` with the status, as every API answer that refuses.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    no_store(ApiError(status, message.into()).into_response())
}

fn no_store(mut res: Response) -> Response {
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// An API answer: JSON, or `{"error": "…"}` with the status.
struct ApiError(StatusCode, String);

impl From<DatasetError> for ApiError {
    fn from(e: DatasetError) -> Self {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError(status, e.public_message())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

impl From<PlatformError> for ApiError {
    fn from(e: PlatformError) -> Self {
        let status = match &e {
            PlatformError::Invalid(_) | PlatformError::BadRequest(_) => StatusCode::BAD_REQUEST,
            PlatformError::NotFound(_) => StatusCode::NOT_FOUND,
            PlatformError::Conflict(_) | PlatformError::Refused(_) => StatusCode::CONFLICT,
            PlatformError::BadCredentials => StatusCode::UNAUTHORIZED,
            PlatformError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            PlatformError::Database(_) | PlatformError::Internal(_) | PlatformError::LeaseLost(_) => {
                tracing::error!(error = %e, "API request failed");
                return ApiError(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "something went wrong on the server; the error has been logged".into(),
                );
            }
        };
        ApiError(status, e.to_string())
    }
}

async fn bearer(state: &AppState, headers: &HeaderMap) -> Result<User, ApiError> {
    let unauthorized =
        || ApiError(StatusCode::UNAUTHORIZED, "a valid API token is required: Authorization: Bearer <token>".into());
    let value = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or_else(unauthorized)?;
    let token = tokens::bearer(value).ok_or_else(unauthorized)?;
    tokens::authenticate(&state.pool, token).await?.ok_or_else(unauthorized)
}

/// A task as the API shows it: the row, with the command and the decision
/// as JSON rather than strings holding JSON — each key once. (A flattened
/// struct wrote the row's string fields and these both, and strict JSON
/// readers refuse an object with a key twice.)
#[derive(Serialize)]
#[serde(transparent)]
struct TaskJson(serde_json::Value);

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
struct ListParams {
    limit: Option<String>,
    before: Option<String>,
}

impl ListParams {
    fn parse(&self) -> Result<(Option<i64>, i64), ApiError> {
        let bad = |m: String| ApiError(StatusCode::BAD_REQUEST, m);
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
async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<Vec<TaskJson>>, ApiError> {
    let user = bearer(&state, &headers).await?;
    let Query(params) = params.map_err(|_| {
        ApiError(StatusCode::BAD_REQUEST, "the query string must be at most one limit=N and one before=ID".into())
    })?;
    let (before, limit) = params.parse()?;
    let tasks = compute::list_compute_tasks(&state.pool, &user, before, limit).await?;
    Ok(Json(tasks.into_iter().map(TaskJson::from).collect()))
}

async fn one(
    State(state): State<AppState>,
    headers: HeaderMap,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<TaskJson>, ApiError> {
    let user = bearer(&state, &headers).await?;
    let id = task_id(id)?;
    Ok(Json(compute::compute_task(&state.pool, &user, id).await?.into()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Submission {
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

async fn submit(
    State(state): State<AppState>,
    stores: Option<Extension<Datasets>>,
    headers: HeaderMap,
    body: Result<Json<Submission>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let user = bearer(&state, &headers).await?;
    let Json(s) = body.map_err(|e| {
        ApiError(StatusCode::BAD_REQUEST, format!("the body must be a compute task in JSON: {}", e.body_text()))
    })?;
    let command = match (s.command, s.shell) {
        (Some(argv), None) => Command::Argv(argv),
        (None, Some(script)) => Command::Shell(script),
        _ => {
            return Err(ApiError(
                StatusCode::BAD_REQUEST,
                "give exactly one of \"command\" (an argv) or \"shell\" (a script)".into(),
            ))
        }
    };
    // In CPUs, as the caller wrote them (the platform's check counts
    // thousandths: "between 100 and 256000" read as CPUs is 1,000 times off).
    if !s.cpus.is_finite() || !(0.1..=256.0).contains(&s.cpus) {
        return Err(ApiError(StatusCode::BAD_REQUEST, "cpus must be a number between 0.1 and 256".into()));
    }
    if s.datasets.iter().any(|d| d.contains(',') || d.trim().is_empty()) {
        return Err(ApiError(StatusCode::BAD_REQUEST, "each entry of \"datasets\" is one dataset-code/version".into()));
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
    id.map(|Path(id)| id).map_err(|_| {
        ApiError(StatusCode::BAD_REQUEST, "a task id is a whole number (as in /api/v1/compute-tasks/7)".into())
    })
}

/// The output: live from the container while the task runs, else what was
/// kept when it ended.
async fn logs(
    State(state): State<AppState>,
    headers: HeaderMap,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Response, ApiError> {
    let user = bearer(&state, &headers).await?;
    let id = task_id(id)?;
    let text = compute::output(&state.pool, &state.fleet, &user, id).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

async fn cancel(
    State(state): State<AppState>,
    headers: HeaderMap,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<TaskJson>, ApiError> {
    let user = bearer(&state, &headers).await?;
    let id = task_id(id)?;
    compute::cancel(&state.pool, &user, id).await?;
    Ok(Json(compute::compute_task(&state.pool, &user, id).await?.into()))
}
