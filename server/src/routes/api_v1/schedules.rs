//! `/api/v1/machines/{id}/schedule` and Start with `{"queue": true}`:
//! a machine's schedule (daily stop/start in the owner's time zone, stop
//! after N hours) and the start that waits for GPUs in the group's line —
//! through `gantry_platform::schedules`, as the machine page's schedule
//! form and Start button (`app/src/api/schedules.rs`).

use super::{
    caller::Caller,
    errors::{ApiError, ErrorBody},
};
use app::state::AppState;
use axum::{
    extract::{
        rejection::{JsonRejection, PathRejection},
        Path, State,
    },
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use gantry_platform::schedules::{self, ScheduleChange, StartOutcome};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A schedule as the machine page shows it (the platform's view as JSON).
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct ScheduleJson(serde_json::Value);

/// The schedule's fields: `"HH:MM"` daily times (empty or absent: none)
/// and hours (0 or absent: none).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    pub stop_at: Option<String>,
    pub start_at: Option<String>,
    pub stop_after_hours: Option<i64>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// Wait in the group's line when there is no room, instead of 409.
    #[serde(default)]
    pub queue: bool,
}

/// Started (`task_id`), or waiting in the line (`queued`: the place, and why).
#[derive(Serialize, ToSchema)]
pub struct StartAnswer {
    pub task_id: Option<i64>,
    #[schema(value_type = Option<Object>)]
    pub queued: Option<serde_json::Value>,
    pub why: Option<String>,
}

fn machine_id(id: Result<Path<i64>, PathRejection>) -> Result<i64, ApiError> {
    id.map(|Path(id)| id).map_err(|e| ApiError::path(e, "/api/v1/machines/7/schedule"))
}

fn view<T: Serialize>(v: T) -> Result<Json<ScheduleJson>, ApiError> {
    serde_json::to_value(v)
        .map(|v| Json(ScheduleJson(v)))
        .map_err(|e| gantry_platform::PlatformError::Internal(format!("schedule: {e}")).into())
}

/// A machine's schedule, its next action and its place in the start line.
#[utoipa::path(get, path = "/api/v1/machines/{id}/schedule", tag = "machines", params(("id" = i64, Path)),
    responses((status = 200, body = ScheduleJson), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn get(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<ScheduleJson>, ApiError> {
    view(schedules::get(&state.pool, &caller.user, machine_id(id)?).await?)
}

/// Sets the schedule (its owner or an admin); all empty clears it.
#[utoipa::path(put, path = "/api/v1/machines/{id}/schedule", tag = "machines", params(("id" = i64, Path)),
    request_body = ScheduleBody,
    responses((status = 200, body = ScheduleJson), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn set(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    body: Result<Json<ScheduleBody>, JsonRejection>,
) -> Result<Json<ScheduleJson>, ApiError> {
    let id = machine_id(id)?;
    let Json(b) = body.map_err(|e| ApiError::body(e, "a schedule"))?;
    let change = ScheduleChange { stop_at: b.stop_at, start_at: b.start_at, stop_after_hours: b.stop_after_hours };
    view(schedules::set(&state.pool, &caller.user, id, change).await?)
}

/// Starts a shut-down machine, admitted like a create: 202 with its task;
/// no room is 409 `refused` with the numbers — or, with `{"queue": true}`,
/// 202 with its place in the group's line (started when GPUs are free).
#[utoipa::path(post, path = "/api/v1/machines/{id}/start", tag = "machines", params(("id" = i64, Path)),
    request_body(content = StartBody, description = "optional"),
    responses((status = 202, body = StartAnswer), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn start(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let id = id.map(|Path(id)| id).map_err(|e| ApiError::path(e, "/api/v1/machines/7/start"))?;
    let b: StartBody = if body.iter().all(u8::is_ascii_whitespace) {
        StartBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body must be empty or {{\"queue\": true}}: {e}")))?
    };
    let answer = match schedules::start(&state.pool, &caller.user, id, b.queue).await? {
        StartOutcome::Started { task_id } => {
            state.dispatch.notify_one();
            StartAnswer { task_id: Some(task_id), queued: None, why: None }
        }
        StartOutcome::Queued { place, why } => {
            StartAnswer { task_id: None, queued: serde_json::to_value(place).ok(), why: Some(why) }
        }
    };
    Ok((StatusCode::ACCEPTED, Json(answer)).into_response())
}
