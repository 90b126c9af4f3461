//! `/api/v1/ssh-keys`: the caller's SSH public keys for the gateway, as
//! the account's SSH keys page (`app/src/api/ssh_keys.rs`,
//! `gantry_platform::ssh_keys`): list, add (one OpenSSH line; a bad, short,
//! huge or duplicate key is refused with the reason), remove.

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
use gantry_platform::ssh_keys;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `{"keys": [{id, name, algorithm, bits, fingerprint, created_at, last_used_at}]}`.
#[derive(Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct KeysJson(serde_json::Value);

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// Empty or absent: the key's comment.
    #[serde(default)]
    pub name: String,
    /// One OpenSSH public key line.
    pub public_key: String,
}

fn json<T: Serialize>(status: StatusCode, key: &str, v: T) -> Result<Response, ApiError> {
    let v = serde_json::to_value(v).map_err(|e| gantry_platform::PlatformError::Internal(format!("ssh keys: {e}")))?;
    Ok((status, Json(serde_json::json!({ key: v }))).into_response())
}

/// The caller's keys.
#[utoipa::path(get, path = "/api/v1/ssh-keys", tag = "account",
    responses((status = 200, body = KeysJson), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn list(caller: Caller, State(state): State<AppState>) -> Result<Response, ApiError> {
    json(StatusCode::OK, "keys", ssh_keys::list(&state.pool, &caller.user).await?)
}

/// Adds a key: `{"key": {...}}`.
#[utoipa::path(post, path = "/api/v1/ssh-keys", tag = "account", request_body = NewKey,
    responses((status = 201, body = KeysJson), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn add(
    caller: Caller,
    State(state): State<AppState>,
    body: Result<Json<NewKey>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(k) = body.map_err(|e| ApiError::body(e, "{\"name\": …, \"public_key\": …}"))?;
    json(StatusCode::CREATED, "key", ssh_keys::add(&state.pool, &caller.user, &k.name, &k.public_key).await?)
}

/// Removes one of the caller's keys (another's is 404).
#[utoipa::path(delete, path = "/api/v1/ssh-keys/{id}", tag = "account", params(("id" = i64, Path)),
    responses((status = 204), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn remove(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let id = id.map(|Path(id)| id).map_err(|e| ApiError::path(e, "/api/v1/ssh-keys/7"))?;
    ssh_keys::remove(&state.pool, &caller.user, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
