//! Who is calling the API, and whether this token may make this request:
//! its bearer token (live: not revoked, not expired, its account enabled),
//! its rate (`rate_limit`) and its scope (`gantry_core::token_scope`): a
//! `read` token only reads, the admin routes (`/api/v1/admin/…`) need an
//! `admin` token of an admin. Every API handler takes a [`Caller`] first,
//! so a request without a right is refused (401/403/429) before anything
//! else of it is read — a malformed id or body without a token is 401.

use super::{errors::ApiError, rate_limit::ApiLimiter};
use app::state::AppState;
use axum::{
    extract::FromRequestParts,
    http::{header, request::Parts, Method, StatusCode},
};
use gantry_platform::{
    accounts::User,
    tokens::{self, Bearer, ScopeRefusal},
};

/// The account a request acts as, and the token it came with.
pub struct Caller {
    pub user: User,
    pub bearer: Bearer,
}

/// The admin console's routes: only `admin` tokens of admins.
pub const ADMIN_PREFIX: &str = "/api/v1/admin";

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        caller(state, parts).await
    }
}

/// The checks of [`Caller`], for routes that also take a browser session
/// (datasets: they call this when a request carries `Authorization`).
pub async fn caller(state: &AppState, parts: &Parts) -> Result<Caller, ApiError> {
    let value =
        parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or_else(ApiError::unauthorized)?;
    let secret = tokens::bearer(value).ok_or_else(ApiError::unauthorized)?;
    let (user, bearer) = tokens::authenticate_scoped(&state.pool, secret).await?.ok_or_else(ApiError::unauthorized)?;
    if let Some(limiter) = parts.extensions.get::<ApiLimiter>() {
        limiter.check(bearer.token_id).map_err(|secs| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("this token made too many requests; try again in {secs} s"),
            )
            .retry_after(secs)
        })?;
    }
    let writes = !matches!(parts.method, Method::GET | Method::HEAD);
    let path = parts.uri.path();
    let admin_route = path == ADMIN_PREFIX || path.starts_with(&format!("{ADMIN_PREFIX}/"));
    bearer.scope.allows(user.role.is_admin(), writes, admin_route).map_err(|refusal| {
        let code = match refusal {
            ScopeRefusal::NotAdmin => "forbidden",
            ScopeRefusal::ReadOnly | ScopeRefusal::NotAdminToken => "insufficient_scope",
        };
        ApiError::forbidden(code, refusal.message())
    })?;
    Ok(Caller { user, bearer })
}
