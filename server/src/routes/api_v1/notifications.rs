//! `/api/v1/notifications`: the caller's notifications, newest first with
//! the unread count, and marking them read — as the notifications page
//! (`app/src/api/notifications.rs`, `gantry_platform::notifications`).

use super::{
    caller::Caller,
    errors::{ApiError, ErrorBody},
};
use app::state::AppState;
use axum::{
    extract::{
        rejection::{PathRejection, QueryRejection},
        Path, Query, State,
    },
    http::StatusCode,
    Json,
};
use gantry_platform::notifications;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `{"items": [...], "unread", "total", "page", "per_page"}`.
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct NotificationsJson(serde_json::Value);

#[derive(Deserialize)]
pub struct PageQuery {
    page: Option<String>,
    per_page: Option<String>,
}

/// One page of the caller's notifications (`?page=`, `?per_page=`).
#[utoipa::path(get, path = "/api/v1/notifications", tag = "account",
    params(("page" = Option<i64>, Query), ("per_page" = Option<i64>, Query)),
    responses((status = 200, body = NotificationsJson), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn list(
    caller: Caller,
    State(state): State<AppState>,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<NotificationsJson>, ApiError> {
    let Query(q) = q.map_err(ApiError::query)?;
    let page = gantry_core::paging::PageRequest::parse(q.page.as_deref(), q.per_page.as_deref());
    let list = notifications::list(&state.pool, &caller.user, page).await?;
    let value = serde_json::to_value(list)
        .map_err(|e| gantry_platform::PlatformError::Internal(format!("notifications: {e}")))?;
    Ok(Json(NotificationsJson(value)))
}

/// Marks one of the caller's notifications read (another's is 404).
#[utoipa::path(post, path = "/api/v1/notifications/{id}/read", tag = "account", params(("id" = i64, Path)),
    responses((status = 204), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn read(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let id = id.map(|Path(id)| id).map_err(|e| ApiError::path(e, "/api/v1/notifications/7/read"))?;
    notifications::mark_read(&state.pool, &caller.user, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Marks all of the caller's notifications read.
#[utoipa::path(post, path = "/api/v1/notifications/read", tag = "account",
    responses((status = 204), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn read_all(caller: Caller, State(state): State<AppState>) -> Result<StatusCode, ApiError> {
    notifications::mark_all_read(&state.pool, &caller.user).await?;
    Ok(StatusCode::NO_CONTENT)
}
