//! `/api/v1/datasets/…`: JSON and streamed files for scripts.

use super::{api_user, download, error_json, no_store, stores, transfer};
use app::state::AppState;
use axum::{
    extract::{FromRequestParts, Path, Query, Request, State},
    http::{request::Parts, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use futures_util::TryStreamExt;
use gantry_platform::{
    accounts::User,
    datasets::{self, access::Access, BeginUpload, DatasetError, Datasets, Filter, UploadState},
    tokens,
};
use serde::Deserialize;

/// `Path` and `Query` whose refusal is the API's: a caller without a right
/// gets the 401 the handler would give, anyone else a JSON 400 — not
/// axum's plain-text answer, given before the token was looked at.
pub struct ApiPath<T>(pub T);
pub struct ApiQuery<T>(pub T);

async fn malformed(state: &AppState, parts: &Parts, what: &str, why: String) -> Response {
    if let Err(refused) = api_user(state, parts).await {
        return refused;
    }
    error_json(&DatasetError::BadRequest(format!("the {what} is malformed: {why}")))
}

impl<T: serde::de::DeserializeOwned + Send> FromRequestParts<AppState> for ApiPath<T> {
    type Rejection = Response;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(t)) => Ok(ApiPath(t)),
            Err(e) => Err(malformed(state, parts, "path", e.body_text()).await),
        }
    }
}

impl<T: serde::de::DeserializeOwned + Send> FromRequestParts<AppState> for ApiQuery<T> {
    type Rejection = Response;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(t)) => Ok(ApiQuery(t)),
            Err(e) => Err(malformed(state, parts, "query", e.body_text()).await),
        }
    }
}

#[derive(Deserialize)]
pub struct FilePath {
    code: String,
    version: String,
    name: String,
}

#[derive(Deserialize)]
pub struct VersionPath {
    code: String,
    version: String,
}

#[derive(Deserialize, Default)]
pub struct PutQuery {
    #[serde(default)]
    replace: Option<String>,
}

impl PutQuery {
    pub fn replace(&self) -> bool {
        matches!(self.replace.as_deref(), Some("1" | "true" | "on" | "yes"))
    }
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    q: Option<String>,
    region: Option<String>,
    category: Option<String>,
}

/// The caller and the stores, or the refusal.
async fn enter(state: &AppState, req: Request) -> Result<(User, Datasets, Parts, axum::body::Body), Response> {
    let (parts, body) = req.into_parts();
    let user = api_user(state, &parts).await?;
    let stores = stores(&parts)?;
    Ok((user, stores, parts, body))
}

/// The right the request came in with, as [`api_user`] took it: its
/// bearer token if it sent one, else its session.
fn access(user: &User, parts: &Parts) -> Access {
    match parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(tokens::bearer) {
        Some(secret) => Access::token(user, secret),
        None => super::session_access(parts, user),
    }
}

/// The datasets the caller may see (`?q=`, `?region=`, `?category=`).
#[utoipa::path(get, path = "/api/v1/datasets", tag = "datasets",
    responses((status = 200, description = "the datasets (JSON)"), (status = "default", body = crate::routes::api_v1::errors::ErrorBody)), security(("token" = ["read"])))]
pub async fn list_datasets(State(state): State<AppState>, ApiQuery(q): ApiQuery<ListQuery>, req: Request) -> Response {
    let (user, _, _, _) = match enter(&state, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let filter =
        Filter { q: q.q, region: q.region.filter(|r| !r.is_empty()), category: q.category.filter(|c| !c.is_empty()) };
    match datasets::list_datasets(&state.pool, &user, &filter).await {
        Ok(list) => no_store(Json(list).into_response()),
        Err(e) => error_json(&e),
    }
}

/// A version's files.
#[utoipa::path(get, path = "/api/v1/datasets/{code}/versions/{version}/files", tag = "datasets", params(("code" = String, Path), ("version" = String, Path)),
    responses((status = 200, description = "the version and its files (JSON)"), (status = "default", body = crate::routes::api_v1::errors::ErrorBody)), security(("token" = ["read"])))]
pub async fn list_files(State(state): State<AppState>, ApiPath(p): ApiPath<VersionPath>, req: Request) -> Response {
    let (user, _, _, _) = match enter(&state, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    match datasets::files(&state.pool, &user, &p.code, &p.version).await {
        Ok((d, v, files)) => no_store(
            Json(serde_json::json!({ "dataset": d.code, "version": v.name, "sealed": v.sealed_at.is_some(), "category": d.category, "files": files }))
                .into_response(),
        ),
        Err(e) => error_json(&e),
    }
}

/// Uploads one file, the body streamed (`?replace=1` to replace).
#[utoipa::path(put, path = "/api/v1/datasets/{code}/versions/{version}/files/{name}", tag = "datasets", params(("code" = String, Path), ("version" = String, Path), ("name" = String, Path)),
    responses((status = 201, description = "the file (JSON)"), (status = "default", body = crate::routes::api_v1::errors::ErrorBody)), security(("token" = ["write"])))]
pub async fn put_file(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<FilePath>,
    ApiQuery(q): ApiQuery<PutQuery>,
    req: Request,
) -> Response {
    let (user, stores, parts, body) = match enter(&state, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let put = transfer::Put { code: &p.code, version: &p.version, name: &p.name, replace: q.replace() };
    match transfer::put_as(&state.pool, &stores, &user, access(&user, &parts), put, &parts.headers, body).await {
        Ok(file) => no_store((StatusCode::CREATED, Json(file)).into_response()),
        Err(e) => error_json(&e),
    }
}

/// Downloads one file (`Range` supported).
#[utoipa::path(get, path = "/api/v1/datasets/{code}/versions/{version}/files/{name}", tag = "datasets", params(("code" = String, Path), ("version" = String, Path), ("name" = String, Path)),
    responses((status = 200, description = "the file's bytes"), (status = "default", body = crate::routes::api_v1::errors::ErrorBody)), security(("token" = ["read"])))]
pub async fn get_file(State(state): State<AppState>, ApiPath(p): ApiPath<FilePath>, req: Request) -> Response {
    let (user, stores, parts, _) = match enter(&state, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    download::download_as(&state.pool, &stores, &user, access(&user, &parts), &p.code, &p.version, &p.name, &parts)
        .await
}

fn header_u64(headers: &HeaderMap, name: &str) -> Result<Option<u64>, DatasetError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| DatasetError::BadRequest(format!("{name} must be a whole number of bytes"))),
    }
}

/// `X-Gantry-Fingerprint`: the upload page's name for the file it sends;
/// an unfinished upload is continued only for the same file.
fn fingerprint(headers: &HeaderMap) -> Result<Option<&str>, DatasetError> {
    match headers.get("x-gantry-fingerprint") {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| DatasetError::BadRequest("X-Gantry-Fingerprint must be visible ASCII characters".into())),
    }
}

fn offsets(status: StatusCode, offset: u64, total: u64) -> Response {
    let mut res = no_store(status.into_response());
    res.headers_mut().insert("upload-offset", HeaderValue::from(offset));
    res.headers_mut().insert("upload-length", HeaderValue::from(total));
    res
}

/// `POST …/uploads/{name}` with `Upload-Length`: starts a resumable
/// upload, or finds the caller's unfinished one of that name and length —
/// with `X-Gantry-Fingerprint`, only if it holds bytes of that same file
/// (one of another file starts over at 0).
#[utoipa::path(post, path = "/api/v1/datasets/{code}/versions/{version}/uploads/{name}", tag = "datasets", params(("code" = String, Path), ("version" = String, Path), ("name" = String, Path)),
    responses((status = 201, description = "`Upload-Offset`: what the server holds"), (status = "default", body = crate::routes::api_v1::errors::ErrorBody)), security(("token" = ["write"])))]
pub async fn start_resumable(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<FilePath>,
    ApiQuery(q): ApiQuery<PutQuery>,
    req: Request,
) -> Response {
    let (user, stores, parts, _) = match enter(&state, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let total = match header_u64(&parts.headers, "upload-length") {
        Ok(Some(t)) => t,
        Ok(None) => {
            return error_json(&DatasetError::BadRequest("a resumable upload needs its length (Upload-Length)".into()))
        }
        Err(e) => return error_json(&e),
    };
    let file = match fingerprint(&parts.headers) {
        Ok(f) => f,
        Err(e) => return error_json(&e),
    };
    let begin = BeginUpload {
        code: &p.code,
        version: &p.version,
        name: &p.name,
        replace: q.replace(),
        total: Some(total),
        resumable: true,
    };
    match datasets::begin_upload_of_file(&state.pool, &stores, &user, &begin, file).await {
        Ok(up) => offsets(if up.offset == 0 { StatusCode::CREATED } else { StatusCode::OK }, up.offset, total),
        Err(e) => error_json(&e),
    }
}

/// How much of a resumable upload the server holds (`Upload-Offset`).
#[utoipa::path(head, path = "/api/v1/datasets/{code}/versions/{version}/uploads/{name}", tag = "datasets", params(("code" = String, Path), ("version" = String, Path), ("name" = String, Path)),
    responses((status = 200, description = "`Upload-Offset` and `Upload-Length`"), (status = "default", body = crate::routes::api_v1::errors::ErrorBody)), security(("token" = ["read"])))]
pub async fn resumable_status(State(state): State<AppState>, ApiPath(p): ApiPath<FilePath>, req: Request) -> Response {
    let (user, stores, _, _) = match enter(&state, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    match datasets::upload_status(&state.pool, &stores, &user, &p.code, &p.version, &p.name).await {
        Ok((offset, total)) => offsets(StatusCode::OK, offset, total),
        Err(e) => {
            no_store(StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR).into_response())
        }
    }
}

/// `PATCH …/uploads/{name}` with `Upload-Offset`: the body continues the
/// file from that offset (it must be what the server holds).
#[utoipa::path(patch, path = "/api/v1/datasets/{code}/versions/{version}/uploads/{name}", tag = "datasets", params(("code" = String, Path), ("version" = String, Path), ("name" = String, Path)),
    responses((status = 204, description = "the new `Upload-Offset`"), (status = 201, description = "complete: the file"), (status = "default", body = crate::routes::api_v1::errors::ErrorBody)), security(("token" = ["write"])))]
pub async fn patch_resumable(State(state): State<AppState>, ApiPath(p): ApiPath<FilePath>, req: Request) -> Response {
    let (user, stores, parts, body) = match enter(&state, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let offset = match header_u64(&parts.headers, "upload-offset") {
        Ok(Some(o)) => o,
        Ok(None) => {
            return error_json(&DatasetError::BadRequest(
                "PATCH needs Upload-Offset: the byte the body starts at".into(),
            ))
        }
        Err(e) => return error_json(&e),
    };
    let file = match fingerprint(&parts.headers) {
        Ok(f) => f,
        Err(e) => return error_json(&e),
    };
    // Found, never begun: an upload cancelled or expired since the client
    // last asked is gone (404), not started again under its name. Another
    // file's upload is not written into (409).
    let upload = match datasets::resume_upload(&state.pool, &stores, &user, &p.code, &p.version, &p.name, file).await {
        Ok(u) => u,
        Err(e) => return error_json(&e),
    };
    let (held, total) = (upload.offset, upload.total.unwrap_or(0));
    if offset != held {
        let mut res = error_json(&DatasetError::Conflict(format!(
            "the server holds {held} bytes of this upload, not {offset}; continue from {held}"
        )));
        res.headers_mut().insert("upload-offset", HeaderValue::from(held));
        return res;
    }
    // A body that says it runs past the declared length is refused before
    // a byte of it is written: what the server holds stays as it is.
    if let Some(len) = transfer::content_length(&parts.headers).filter(|len| offset.saturating_add(*len) > total) {
        let why = format!(
            "the body ({len} bytes from byte {offset}) runs past the upload's declared length of {total} bytes; nothing was written: send at most {} bytes from byte {offset}",
            total - offset
        );
        let mut res = error_json(&DatasetError::BadRequest(why));
        res.headers_mut().insert("upload-offset", HeaderValue::from(held));
        return res;
    }
    let (expected, access) = (transfer::client_sha256(&parts.headers), access(&user, &parts));
    let pool = state.pool.clone();
    // Its own task: a dropped connection still ends in a consistent state.
    let task = tokio::spawn(async move {
        let stream = body.into_data_stream().map_err(std::io::Error::other);
        datasets::write_upload_as(&pool, &upload, offset, stream, expected.as_deref(), access).await
    });
    match task.await {
        Ok(Ok(UploadState::Partial { offset, total })) => offsets(StatusCode::NO_CONTENT, offset, total),
        Ok(Ok(UploadState::Done(file))) => {
            let mut res = no_store((StatusCode::CREATED, Json(file)).into_response());
            res.headers_mut().insert("upload-offset", HeaderValue::from(total));
            res
        }
        Ok(Err(e)) => error_json(&e),
        Err(e) => error_json(&DatasetError::store("the upload failed on the server", format!("upload task: {e}"))),
    }
}

/// Cancels a resumable upload.
#[utoipa::path(delete, path = "/api/v1/datasets/{code}/versions/{version}/uploads/{name}", tag = "datasets", params(("code" = String, Path), ("version" = String, Path), ("name" = String, Path)),
    responses((status = 204, description = "cancelled"), (status = "default", body = crate::routes::api_v1::errors::ErrorBody)), security(("token" = ["write"])))]
pub async fn cancel_resumable(State(state): State<AppState>, ApiPath(p): ApiPath<FilePath>, req: Request) -> Response {
    let (user, stores, _, _) = match enter(&state, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    match datasets::cancel_upload(&state.pool, &stores, &user, &p.code, &p.version, &p.name).await {
        Ok(()) => no_store(StatusCode::NO_CONTENT.into_response()),
        Err(e) => error_json(&e),
    }
}
