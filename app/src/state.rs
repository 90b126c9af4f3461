//! Server-side state reached from server functions and components, as in
//! the leptos `session_auth_axum` example: the axum `AppState` is provided
//! as context, and small helpers hand out what a server function needs.

use crate::error::AppError;
use axum::extract::FromRef;
use gantry_platform::{accounts::User, db::Pool, fleet::Fleet, machines::Admissions};
use leptos::prelude::*;
use std::sync::Arc;

#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub pool: Pool,
    /// The admission worker: every create request goes through it.
    pub admissions: Admissions,
    /// Wakes the dispatcher when a task is queued.
    pub dispatch: Arc<tokio::sync::Notify>,
    /// Executors of the worker nodes (admin: add node, test connection).
    pub fleet: Fleet,
}

/// The account signed in for this request, resolved once per request by the
/// server's session middleware and stored in the request's extensions.
#[derive(Clone, Debug, Default)]
pub struct RequestUser(pub Option<User>);

pub const SESSION_USER_KEY: &str = "user_id";

pub fn state() -> Result<AppState, AppError> {
    use_context::<AppState>().ok_or_else(|| AppError::Internal("application state missing".into()))
}

pub fn pool() -> Result<Pool, AppError> {
    state().map(|s| s.pool)
}

pub fn fleet() -> Result<Fleet, AppError> {
    state().map(|s| s.fleet)
}

pub fn admissions() -> Result<Admissions, AppError> {
    state().map(|s| s.admissions)
}

/// Tells the dispatcher there is work.
pub fn wake_dispatcher() {
    if let Ok(s) = state() {
        s.dispatch.notify_one();
    }
}

pub fn request_user() -> Option<User> {
    use_context::<http::request::Parts>()?.extensions.get::<RequestUser>()?.0.clone()
}

/// The signed-in user, or 401.
pub fn auth() -> Result<User, AppError> {
    request_user().ok_or_else(|| AppError::Unauthorized.respond())
}

/// The signed-in administrator, or 401/403.
pub fn require_admin() -> Result<User, AppError> {
    let user = auth()?;
    if user.role.is_admin() {
        Ok(user)
    } else {
        Err(AppError::Forbidden.respond())
    }
}
