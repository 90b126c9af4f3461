//! `POST /api/v1/login`: a username and password for a personal API
//! token, answered once — what `gantry login` calls. The password is
//! checked as the sign-in page checks it (`accounts::authenticate_with`:
//! the throttle per account and client address, counted before the argon2
//! gate; unknown users and wrong passwords the same answer), and the token
//! is made as the Tokens page makes it (`tokens::create_confirmed_scoped`:
//! the password again, the server's token lifetime, the scope asked for —
//! `write` unless said, `admin` for administrators only —, audited). A refused
//! attempt is audited as the sign-in page's is. An account that must
//! choose a new password gets no token until it has.

use crate::routes::api_v1::errors::{ApiError, ErrorBody};
use app::{api::auth::ClientAddress, state::AppState};
use axum::{
    extract::{rejection::JsonRejection, Extension, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use gantry_platform::{
    accounts, audit,
    password::Gate,
    tokens::{self, TokenLifetime, TokenScope},
    PlatformError,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

/// The route with its documentation, merged into the API's (`api_v1::routes`).
pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(login))
}

/// A username and password for a token.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
    /// How the token is listed on the Tokens page (default "gantry CLI").
    pub token_name: Option<String>,
    /// `read`, `write` (default) or `admin` (administrators only).
    pub scope: Option<String>,
}

/// The new token's secret — shown this once — and how it is listed.
#[derive(Serialize, ToSchema)]
pub struct LoginAnswer {
    pub token: String,
    pub id: i64,
    pub name: String,
    pub prefix: String,
    pub scope: String,
    pub username: String,
    pub expires_at: Option<i64>,
}

/// Signs in with a password and answers a new personal API token (what
/// `gantry login` calls); checked and throttled as the sign-in page is.
#[utoipa::path(post, path = "/api/v1/login", tag = "account", request_body = LoginRequest,
    responses((status = 201, body = LoginAnswer), (status = "default", body = ErrorBody)))]
pub async fn login(
    State(state): State<AppState>,
    address: Option<Extension<ClientAddress>>,
    gate: Option<Extension<Arc<Gate>>>,
    lifetime: Option<Extension<TokenLifetime>>,
    body: Result<Json<LoginRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let shape = "{\"username\": …, \"password\": …, \"token_name\": …, \"scope\": …}";
    let Json(req) = body.map_err(|e| ApiError::body(e, shape))?;
    let scope = match req.scope.as_deref() {
        None => TokenScope::Write,
        Some(s) => TokenScope::parse(s).ok_or_else(|| ApiError::bad_request("scope must be read, write or admin"))?,
    };
    let address = address.and_then(|Extension(ClientAddress(a))| a);
    let gate = gate.map_or_else(Gate::shared, |Extension(g)| g);
    let lifetime = lifetime.map(|Extension(l)| l).unwrap_or_default();
    let name = req.token_name.as_deref().map(str::trim).filter(|n| !n.is_empty()).unwrap_or("gantry CLI");
    let pool = &state.pool;
    let signed_in = accounts::authenticate_with(pool, &gate, &req.username, &req.password, address.as_deref()).await;
    let refused = match &signed_in {
        Err(PlatformError::BadCredentials) => Some("wrong username or password"),
        Err(PlatformError::Refused(_)) => Some("account disabled"),
        _ => None,
    };
    if let Some(why) = refused {
        let what = format!("API login as {} refused: {why}", audit::untrusted_name(req.username.trim()));
        audit::access(pool, None, "auth.sign_in_failed", &what, address.as_deref(), None).await;
    }
    let user = signed_in.map_err(refusal)?;
    if user.must_change_password {
        return Err(ApiError::forbidden(
            "forbidden",
            "choose a new password on the portal first (your password was reset by an administrator); no token was made",
        ));
    }
    if !scope.may_be_made_by(user.role.is_admin()) {
        return Err(ApiError::forbidden("forbidden", "only administrators may make admin tokens; no token was made"));
    }
    let (view, secret) =
        tokens::create_confirmed_scoped(pool, &gate, &user, &req.password, name, address.as_deref(), lifetime, scope)
            .await
            .map_err(refusal)?;
    let answer = LoginAnswer {
        token: secret,
        id: view.id,
        name: view.name,
        prefix: view.prefix,
        scope: view.scope,
        username: user.username,
        expires_at: view.expires_at,
    };
    Ok(crate::routes::api_v1::no_store((StatusCode::CREATED, Json(answer)).into_response()))
}

/// The platform's refusal in the API's shape; a wrong name or password is
/// one answer (401 `bad_credentials`), a disabled account 403.
fn refusal(e: PlatformError) -> ApiError {
    match e {
        PlatformError::BadCredentials => {
            ApiError::new(StatusCode::UNAUTHORIZED, "bad_credentials", "wrong username or password; no token was made")
        }
        PlatformError::Refused(m) => ApiError::forbidden("forbidden", m),
        other => other.into(),
    }
}
