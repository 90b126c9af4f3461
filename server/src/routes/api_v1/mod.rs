//! The JSON API for scripts (`/api/v1/…`), authenticated by personal API
//! tokens (`Authorization: Bearer gnt_…`) within their scope and rate
//! (`caller`, `rate_limit`). One file per route family, each calling the
//! platform functions its pages' server functions call: `compute`
//! (compute tasks), `machines` (dev machines and their tasks), `account`
//! (tokens, quota), `schedules` (a machine's schedule, queued starts),
//! `notifications`, `ssh_keys`, `admin` (the admin console, admin tokens
//! only).
//! Datasets' routes are in `routes::datasets`. Every answer that refuses
//! is `errors`' one shape; every route is documented (`openapi`).

pub mod account;
pub mod admin;
pub mod caller;
pub mod compute;
pub mod errors;
pub mod machines;
pub mod notifications;
pub mod openapi;
pub mod rate_limit;
pub mod schedules;
pub mod ssh_keys;

pub use errors::{error, no_store, ApiError};

use app::state::AppState;
use axum::{
    http::{Method, StatusCode, Uri},
    response::{IntoResponse, Response},
    routing::any,
    Router,
};
use utoipa::OpenApi;
use utoipa_axum::{router::OpenApiRouter, routes};

/// The API's routes, each with its documentation (`openapi`).
pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(openapi::document))
        .routes(routes!(compute::list, compute::submit))
        .routes(routes!(compute::one))
        .routes(routes!(compute::logs))
        .routes(routes!(compute::cancel))
        .routes(routes!(machines::list, machines::create))
        .routes(routes!(machines::one, machines::delete))
        .routes(routes!(machines::stop))
        .routes(routes!(schedules::start))
        .routes(routes!(schedules::get, schedules::set))
        .routes(routes!(machines::restart))
        .routes(routes!(machines::reinstall))
        .routes(routes!(machines::snapshot))
        .routes(routes!(machines::restore))
        .routes(routes!(machines::task))
        .routes(routes!(account::list, account::create))
        .routes(routes!(account::revoke))
        .routes(routes!(account::quota))
        .routes(routes!(notifications::list))
        .routes(routes!(notifications::read))
        .routes(routes!(notifications::read_all))
        .routes(routes!(ssh_keys::list, ssh_keys::add))
        .routes(routes!(ssh_keys::remove))
        // The CLI's login (`routes::api_login`).
        .merge(crate::routes::api_login::api())
        .merge(admin::api())
}

pub fn routes() -> Router<AppState> {
    let (router, mut doc) = api().split_for_parts();
    // Datasets' routes are built in `routes::datasets` (with their body
    // limits and browser forms); their documentation joins here.
    doc.merge(crate::routes::datasets::DatasetsDoc::openapi());
    openapi::publish(&doc);
    router
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
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", message).into_response()
}

/// A path under `/api/v1` that names nothing: 404 `no_such_path`.
async fn no_such_path(uri: Uri) -> Response {
    let message = format!("no such API path: {} (see /api/v1/openapi.json, or the API page of the portal)", uri.path());
    ApiError::new(StatusCode::NOT_FOUND, "no_such_path", message).into_response()
}
