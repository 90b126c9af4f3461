//! `/api/v1/tokens` and `/api/v1/quota`: the caller's own API tokens (as
//! the Tokens page lists, makes and revokes them: a new one needs the
//! account's password, checked and throttled as a sign-in is) and their
//! group's GPU quota and use (the dashboard's figures).

use super::{
    caller::Caller,
    errors::{ApiError, ErrorBody},
};
use app::{api::auth::ClientAddress, state::AppState};
use axum::{
    extract::{
        rejection::{JsonRejection, PathRejection},
        Extension, Path, State,
    },
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use gantry_platform::{
    password::Gate,
    tokens::{self, TokenLifetime, TokenScope, TokenView},
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

/// A token as the Tokens page lists it (never its secret).
#[derive(Serialize, ToSchema)]
pub struct TokenJson {
    pub id: i64,
    pub name: String,
    /// The secret's first characters, to tell tokens apart.
    pub prefix: String,
    /// `read`, `write` or `admin`.
    pub scope: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// `active`, `expired` or `revoked`, as the server judged it.
    pub state: String,
}

impl From<TokenView> for TokenJson {
    fn from(t: TokenView) -> Self {
        let (state, _) = app::model::tokens::state_label(t.revoked_at, t.expired, t.expires_at);
        TokenJson {
            id: t.id,
            name: t.name,
            prefix: t.prefix,
            scope: t.scope,
            created_at: t.created_at,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
            revoked_at: t.revoked_at,
            state: state.to_string(),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenJson>,
}

/// A new token: its name, the account's password, its scope (default `write`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    pub name: String,
    pub password: String,
    pub scope: Option<String>,
}

/// The new token, with its secret — shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedToken {
    pub token: TokenJson,
    pub secret: String,
}

#[derive(Serialize, ToSchema)]
pub struct Quota {
    pub group: String,
    pub gpu_quota: i64,
    pub gpus_in_use: i64,
    pub max_gpus_per_machine: i64,
}

/// The caller's tokens, newest first, with scope, expiry and last use.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "account",
    responses((status = 200, body = TokenList), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn list(caller: Caller, State(state): State<AppState>) -> Result<Json<TokenList>, ApiError> {
    let list = tokens::list(&state.pool, &caller.user).await?;
    Ok(Json(TokenList { tokens: list.into_iter().map(TokenJson::from).collect() }))
}

/// Makes a token, as the Tokens page does (the password is asked for; an
/// `admin` token only for an admin: 403 `forbidden` otherwise).
#[utoipa::path(post, path = "/api/v1/tokens", tag = "account", request_body = NewToken,
    responses((status = 201, body = CreatedToken), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn create(
    caller: Caller,
    State(state): State<AppState>,
    address: Option<Extension<ClientAddress>>,
    gate: Option<Extension<Arc<Gate>>>,
    lifetime: Option<Extension<TokenLifetime>>,
    body: Result<Json<NewToken>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body.map_err(|e| ApiError::body(e, "{\"name\": …, \"password\": …, \"scope\": …}"))?;
    let scope = match req.scope.as_deref() {
        None => TokenScope::Write,
        Some(s) => TokenScope::parse(s).ok_or_else(|| ApiError::bad_request("scope must be read, write or admin"))?,
    };
    if !scope.may_be_made_by(caller.user.role.is_admin()) {
        return Err(ApiError::forbidden("forbidden", "only administrators may make admin tokens; no token was made"));
    }
    let address = address.and_then(|Extension(ClientAddress(a))| a);
    let gate = gate.map_or_else(Gate::shared, |Extension(g)| g);
    let lifetime = lifetime.map(|Extension(l)| l).unwrap_or_default();
    let (view, secret) = tokens::create_confirmed_scoped(
        &state.pool,
        &gate,
        &caller.user,
        &req.password,
        &req.name,
        address.as_deref(),
        lifetime,
        scope,
    )
    .await?;
    Ok((StatusCode::CREATED, Json(CreatedToken { token: view.into(), secret })).into_response())
}

/// Revokes one of the caller's tokens (another's is 404).
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "account", params(("id" = i64, Path)),
    responses((status = 204), (status = "default", body = ErrorBody)),
    security(("token" = ["write"])))]
pub async fn revoke(
    caller: Caller,
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let id = id.map(|Path(id)| id).map_err(|e| ApiError::path(e, "/api/v1/tokens/7"))?;
    tokens::revoke(&state.pool, &caller.user, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's group, its GPU quota and the GPUs in use.
#[utoipa::path(get, path = "/api/v1/quota", tag = "account",
    responses((status = 200, body = Quota), (status = "default", body = ErrorBody)),
    security(("token" = ["read"])))]
pub async fn quota(caller: Caller) -> Json<Quota> {
    let q = caller.user.quota();
    Json(Quota {
        group: q.group,
        gpu_quota: q.gpu_quota,
        gpus_in_use: q.gpus_in_use,
        max_gpus_per_machine: q.max_gpus_per_machine,
    })
}
