//! The upload page's routes (session cookie): a streamed `PUT` that the
//! page's script sends with a progress bar, the same as a plain multipart
//! form without JavaScript, and the download link.

use super::{download, error_json, no_store, session_user, stores, transfer};
use crate::http::multipart_guard;
use app::components::flash::{Outcome, DATASET_UPLOAD};
use app::state::AppState;
use axum::{
    extract::{Path, Query, Request, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
    Json,
};
use axum_messages::Messages;
use futures_util::TryStreamExt;
use gantry_platform::{
    accounts::User,
    datasets::{self, BeginUpload, DatasetError, Datasets, UploadState},
    db::Pool,
};
use serde::Deserialize;

#[derive(Deserialize)]
pub struct VersionPath {
    code: String,
    version: String,
}

#[derive(Deserialize)]
pub struct NameQuery {
    name: Option<String>,
    replace: Option<String>,
}

fn signed_in(parts: &axum::http::request::Parts) -> Result<User, Response> {
    session_user(parts).ok_or_else(|| no_store((StatusCode::UNAUTHORIZED, "please sign in").into_response()))
}

/// `PUT /datasets/{code}/{version}/upload?name=N`: the body is the file.
pub async fn put_upload(
    State(state): State<AppState>,
    Path(p): Path<VersionPath>,
    Query(q): Query<NameQuery>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let user = match signed_in(&parts) {
        Ok(u) => u,
        Err(r) => return r,
    };
    let stores = match stores(&parts) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let name = q.name.unwrap_or_default();
    let replace = matches!(q.replace.as_deref(), Some("1" | "true" | "on"));
    let put = transfer::Put { code: &p.code, version: &p.version, name: &name, replace };
    match transfer::put_as(&state.pool, &stores, &user, super::session_access(&parts, &user), put, &parts.headers, body)
        .await
    {
        Ok(file) => no_store((StatusCode::CREATED, Json(file)).into_response()),
        Err(e) => error_json(&e),
    }
}

pub async fn download(
    State(state): State<AppState>,
    Path(p): Path<VersionPath>,
    Query(q): Query<NameQuery>,
    req: Request,
) -> Response {
    let (parts, _) = req.into_parts();
    let user = match signed_in(&parts) {
        Ok(u) => u,
        Err(r) => return r,
    };
    let stores = match stores(&parts) {
        Ok(s) => s,
        Err(r) => return r,
    };
    download::download_as(
        &state.pool,
        &stores,
        &user,
        super::session_access(&parts, &user),
        &p.code,
        &p.version,
        q.name.as_deref().unwrap_or(""),
        &parts,
    )
    .await
}

/// `POST /datasets/{code}/{version}/upload` from the page's form
/// (multipart: an optional `replace`, then one or more `file` parts),
/// answered by a redirect to the version page, which says what happened
/// (kept in the session, `http::outcomes`) — or by 400 for a body no form
/// sends (its framing past the guard's limits,
/// an overlong `replace`). A file refused after others were stored is said
/// beside them: they are listed, and sending the form again as it was would
/// be refused for them.
pub async fn form_upload(State(state): State<AppState>, Path(p): Path<VersionPath>, req: Request) -> Response {
    let messages = req.extensions().get::<Messages>().cloned();
    let back = |uploaded: Option<String>, error: Option<String>| {
        if let Some(messages) = &messages {
            let outcome = Outcome { endpoint: DATASET_UPLOAD.into(), error, answer: uploaded };
            crate::http::outcomes::tell(messages, outcome);
        }
        Redirect::to(&format!("/datasets/{}/{}", enc(&p.code), enc(&p.version))).into_response()
    };
    let mut done = Vec::new();
    let outcome = form_files(&state, &p, req, &mut done).await;
    let stored = (!done.is_empty()).then(|| done.join(", "));
    match outcome {
        Ok(()) if done.is_empty() => back(None, Some("choose at least one file".into())),
        Ok(()) => back(stored, None),
        Err(FormError::Back(text)) => back(stored, Some(text)),
        Err(FormError::Bad(text)) => no_store((StatusCode::BAD_REQUEST, text).into_response()),
    }
}

/// The form's `replace` field: a checkbox's `on` (or `1`).
const MAX_REPLACE_FIELD: usize = 16;

enum FormError {
    /// Said on the version page.
    Back(String),
    /// A 400: the body is not what the page's form sends.
    Bad(String),
}

impl From<String> for FormError {
    fn from(text: String) -> Self {
        FormError::Back(text)
    }
}

impl From<&str> for FormError {
    fn from(text: &str) -> Self {
        FormError::Back(text.into())
    }
}

/// Stores the form's files in turn, naming each stored one in `done`.
async fn form_files(state: &AppState, p: &VersionPath, req: Request, done: &mut Vec<String>) -> Result<(), FormError> {
    let (parts, body) = req.into_parts();
    let user = session_user(&parts).ok_or("please sign in")?;
    let access = super::session_access(&parts, &user);
    let stores = parts.extensions.get::<Datasets>().cloned().ok_or_else(|| DatasetError::Unconfigured.to_string())?;
    // This route has no body limit (files are streamed): the guard bounds
    // what multer would otherwise buffer, and cuts a silent body.
    let req = Request::from_parts(parts, body);
    let (mut form, tripped) = multipart_guard::multipart(req, state, multipart_guard::Limits::default())
        .await
        .map_err(|e| format!("not a form upload: {e}"))?;
    // A multer error after the guard cut the body: the guard's reason.
    let failed = |e: String| match tripped.reason() {
        Some(why) => FormError::Bad(why.to_string()),
        None => FormError::Back(e),
    };
    let mut replace = false;
    while let Some(mut field) = form.next_field().await.map_err(|e| failed(e.to_string()))? {
        match field.name() {
            Some("replace") => {
                // Read to a checkbox value's length at most, not whole.
                let mut value = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(|e| failed(e.to_string()))? {
                    if value.len() + chunk.len() > MAX_REPLACE_FIELD {
                        return Err(FormError::Bad(format!(
                            "the replace field is longer than {MAX_REPLACE_FIELD} bytes"
                        )));
                    }
                    value.extend_from_slice(&chunk);
                }
                replace = matches!(&value[..], b"on" | b"1");
            }
            Some("file") => {
                let name = field.file_name().unwrap_or("").to_string();
                if name.is_empty() {
                    continue; // the form was sent without choosing a file
                }
                let begin = BeginUpload {
                    code: &p.code,
                    version: &p.version,
                    name: &name,
                    replace,
                    total: None,
                    resumable: false,
                };
                let upload = datasets::begin_upload(&state.pool, &stores, &user, &begin)
                    .await
                    .map_err(|e| e.public_message())?;
                // If the connection drops, this future is dropped mid-write:
                // the guard removes the upload then.
                let guard = Unfinished { pool: state.pool.clone(), upload: upload.clone(), armed: true };
                let stream = field.map_err(std::io::Error::other);
                let result = datasets::write_upload_as(&state.pool, &upload, 0, stream, None, access.clone()).await;
                guard.disarm();
                match result {
                    Ok(UploadState::Done(_)) => done.push(name),
                    Ok(UploadState::Partial { .. }) => return Err("the upload ended early".into()),
                    Err(e) => return Err(failed(format!("{name}: {}", e.public_message()))),
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Removes an upload whose request future was dropped before it finished.
/// It names the upload itself (not its name in the version, which a new
/// upload may hold by the time this runs), and it bypasses the writer's
/// lease: the writer was this request.
struct Unfinished {
    pool: Pool,
    upload: datasets::Upload,
    armed: bool,
}

impl Unfinished {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (pool, upload) = (self.pool.clone(), self.upload.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { datasets::abandon_upload(&pool, &upload).await });
        }
    }
}

use gantry_core::url::encode as enc;
