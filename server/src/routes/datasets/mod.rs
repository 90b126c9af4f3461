//! Dataset routes beside the Leptos pages: the streamed upload and the
//! download, for scripts (`/api/v1/…`, personal API tokens) and for the
//! browser (`/datasets/…`, the session cookie).
//!
//! | route | what |
//! |---|---|
//! | `GET /api/v1/datasets` | the datasets the token's owner may see (JSON) |
//! | `GET /api/v1/datasets/{code}/versions/{version}/files` | the version's files (JSON) |
//! | `PUT …/files/{name}[?replace=1]` | upload one file, the body streamed (one request: cut → nothing kept) |
//! | `GET …/files/{name}` | download, `Range` supported |
//! | `POST …/uploads/{name}` + `Upload-Length` | start (or find) a resumable upload; answers `Upload-Offset` |
//! | `HEAD …/uploads/{name}` | `Upload-Offset`: bytes the server holds; `Upload-Length` |
//! | `PATCH …/uploads/{name}` + `Upload-Offset` | append from that offset; 204 + new `Upload-Offset`, or 201 + the file when complete |
//! | `DELETE …/uploads/{name}` | cancel a resumable upload |
//! | `PUT /datasets/{code}/{version}/upload?name=N[&replace=1]` | the upload page's streamed upload (session) |
//! | `POST /datasets/{code}/{version}/upload` | the same without JavaScript (multipart form; session) |
//! | `GET /datasets/{code}/{version}/download?name=N` | the version page's download link (session) |
//!
//! The stores come in a request extension ([`Datasets`]) that `gantry
//! serve` adds; without it every route answers 503.

mod api;
mod args;
mod browser;
mod download;
mod range;
mod transfer;

pub use args::DatasetArgs;

/// The API routes' documentation, merged into the API's OpenAPI document
/// (`api_v1::openapi`); the routes themselves are in [`routes`].
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    api::list_datasets,
    api::list_files,
    api::put_file,
    api::get_file,
    api::start_resumable,
    api::resumable_status,
    api::patch_resumable,
    api::cancel_resumable
))]
pub struct DatasetsDoc;

use app::state::{AppState, RequestUser};
use axum::{
    extract::DefaultBodyLimit,
    http::{header, request::Parts, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, put},
    Json, Router,
};
use gantry_platform::{
    accounts::User,
    datasets::{
        access::{Access, SessionProbe},
        DatasetError, Datasets,
    },
};

pub fn routes() -> Router<AppState> {
    let files = "/api/v1/datasets/{code}/versions/{version}";
    // A name is at least one character: `…/files/` with none would match
    // no route here and fall to another (the server functions' 405).
    let nameless = |what: &'static str| {
        move || async move {
            crate::routes::api_v1::error(
                StatusCode::BAD_REQUEST,
                format!("a file name is required after {what}/ (as in {what}/train.bin)"),
            )
        }
    };
    let api = Router::new()
        .route("/api/v1/datasets", get(api::list_datasets))
        .route(&format!("{files}/files"), get(api::list_files))
        .route(&format!("{files}/files/{{*name}}"), put(api::put_file).get(api::get_file))
        .route(&format!("{files}/files/"), put(nameless("files")).get(nameless("files")))
        .route(
            &format!("{files}/uploads/{{*name}}"),
            axum::routing::post(api::start_resumable)
                .head(api::resumable_status)
                .patch(api::patch_resumable)
                .delete(api::cancel_resumable),
        )
        .route(
            &format!("{files}/uploads/"),
            axum::routing::post(nameless("uploads"))
                .head(nameless("uploads"))
                .patch(nameless("uploads"))
                .delete(nameless("uploads")),
        )
        // A method a route does not take: the API's 405, with `Allow`.
        .method_not_allowed_fallback(crate::routes::api_v1::wrong_method);
    Router::new()
        .merge(api)
        .route("/datasets/{code}/{version}/upload", put(browser::put_upload).post(browser::form_upload))
        .route("/datasets/{code}/{version}/download", get(browser::download))
        .layer(DefaultBodyLimit::disable())
}

/// A refusal as the API shows it: `{"error": "…", "code": "…"}` with the
/// status (`api_v1::errors`).
pub fn error_json(e: &DatasetError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let code = crate::routes::api_v1::errors::dataset_code(e);
    let body = serde_json::json!({ "error": e.public_message(), "code": code });
    let mut res = no_store((status, Json(body)).into_response());
    // Another request holds the upload, or a replace is moving the file:
    // the client may simply try again (the second lasts a moment).
    match e {
        DatasetError::Busy(_) => {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        DatasetError::Replacing(_) => {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        _ => {}
    }
    res
}

pub fn no_store(mut res: Response) -> Response {
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

pub fn unauthorized() -> Response {
    crate::routes::api_v1::ApiError::unauthorized().into_response()
}

/// The stores `gantry serve` configured.
pub fn stores(parts: &Parts) -> Result<Datasets, Response> {
    parts.extensions.get::<Datasets>().cloned().ok_or_else(|| error_json(&DatasetError::Unconfigured))
}

/// The API's caller: a bearer token (personal API tokens, as the compute
/// API: within its scope and rate, `api_v1::caller`), or else the
/// signed-in session the guards resolved.
pub async fn api_user(state: &AppState, parts: &Parts) -> Result<User, Response> {
    if parts.headers.contains_key(header::AUTHORIZATION) {
        return crate::routes::api_v1::caller::caller(state, parts)
            .await
            .map(|c| c.user)
            .map_err(IntoResponse::into_response);
    }
    session_user(parts).ok_or_else(unauthorized)
}

/// The signed-in user of a browser request.
pub fn session_user(parts: &Parts) -> Option<User> {
    parts.extensions.get::<RequestUser>().and_then(|u| u.0.clone())
}

/// The right of a browser request: the account's sessions as they are,
/// and this very session while its row says it lasts — signing out (in
/// any tab) stops a transfer it let in, as it closes a terminal.
pub fn session_access(parts: &Parts, user: &User) -> Access {
    let watch = parts.extensions.get::<crate::routes::workspace::SessionWatch>().cloned();
    let id = parts.extensions.get::<tower_sessions::Session>().and_then(tower_sessions::Session::id);
    match (watch, id) {
        (Some(watch), Some(id)) => Access::browser_session(
            user,
            SessionProbe::new(move || {
                let watch = watch.clone();
                async move { watch.session_lasts(&id).await }
            }),
        ),
        _ => Access::session(user),
    }
}

/// The stores of `gantry serve`, with what earlier runs left half-written
/// removed; each store is named in the log.
pub async fn prepare(
    args: &DatasetArgs,
    pool: &gantry_platform::db::Pool,
    data_dir: &std::path::Path,
) -> Result<Datasets, gantry_platform::PlatformError> {
    let stores = args.build(data_dir).map_err(gantry_platform::PlatformError::Internal)?;
    for (what, store) in stores.describe() {
        tracing::info!(store = %store, "dataset store ({what})");
    }
    // Before this server takes requests: every one-request upload there
    // is, is another process's.
    clean(pool, &stores, i64::MAX).await;
    let started = gantry_platform::now();
    // Uploads whose writer's lease was still held are looked at again once
    // it has lapsed, if that writer was a process that died. Then, for as
    // long as the server runs, the sweep: resumable uploads abandoned
    // (a closed tab) would otherwise hold their quota, block sealing and
    // keep their temporary objects until the next restart.
    let (pool, later) = (pool.clone(), stores.clone());
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(gantry_platform::datasets::writing::LEASE_SECS as u64 + 5))
            .await;
        let (p, s) = (pool.clone(), later.clone());
        gantry_platform::contained::pass("dataset clean after start", async move { clean(&p, &s, started).await })
            .await;
        loop {
            tokio::time::sleep(gantry_platform::datasets::SWEEP_EVERY).await;
            let (p, s) = (pool.clone(), later.clone());
            gantry_platform::contained::pass("dataset sweep", async move { sweep(&p, &s).await }).await;
        }
    });
    Ok(stores)
}

async fn sweep(pool: &gantry_platform::db::Pool, stores: &Datasets) {
    match gantry_platform::datasets::sweep(pool, stores, gantry_platform::now()).await {
        Ok(swept) if swept == Default::default() => {}
        Ok(swept) => tracing::info!(expired_uploads = swept.expired, purged_versions = swept.purged, "dataset sweep"),
        Err(e) => {
            tracing::warn!(error = %e, "the dataset sweep failed; it runs again in {} s", gantry_platform::datasets::SWEEP_EVERY.as_secs())
        }
    }
}

/// `started`: when this server started taking requests; its own
/// one-request uploads (begun since) are not a dead process's leftovers.
async fn clean(pool: &gantry_platform::db::Pool, stores: &Datasets, started: i64) {
    match gantry_platform::datasets::clean_after_start(pool, stores, started).await {
        Ok(0) => {}
        Ok(n) => tracing::warn!(removed = n, "removed temporary dataset uploads left by an earlier run"),
        Err(e) => {
            tracing::warn!(error = %e, "could not clean temporary dataset uploads; they are tried again at the next start")
        }
    }
}
