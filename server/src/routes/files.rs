//! Files in and out of a machine's data volume (`/data`), streamed through
//! the engine's archive API: the container may be running or stopped.
//!
//! Paths are relative to the volume (`/data/...` accepted); `..`, other
//! absolute paths and symbolic links on the way are refused — the engine
//! writes as root, so a link planted in the volume must not redirect an
//! upload elsewhere in the container. An upload's size must be known
//! before its bytes (a tar header carries it): `PUT` needs Content-Length
//! and streams straight through; a form upload (multipart, size unknown)
//! is spooled to a temporary file first. Both are refused beyond the
//! configured limit; a user spools at most [`SPOOLS_PER_USER`] form
//! uploads at once, the server [`SPOOLS_MAX`]. An upload cut short can leave a partial file. One
//! whose session ends (`SessionWatch`) stops, answered 401; a download is cut.

use super::{
    terminal::Full,
    workspace::{enter, exec_error, executor, internal, refusal, refuse, wants_html, Watched, WsState},
};
use app::components::flash::{Outcome, MACHINE_FILES};
use axum::{
    body::Body,
    extract::{Path, Query, Request, State},
    http::{header, request::Parts, HeaderValue, StatusCode},
    response::{IntoResponse, Redirect, Response},
    Json,
};
use axum_messages::Messages;
use bytes::Bytes;
use futures_util::{stream, StreamExt, TryStreamExt};
use gantry_platform::{
    executor::{
        inside::{ByteStream, Download, Upload},
        ExecError, Executor, DATA_MOUNT,
    },
    workspace::{paths::VolumePath, Target},
};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

#[derive(Debug, Default, Deserialize)]
pub struct FileQuery {
    path: Option<String>,
}

/// What the checks found along a path.
struct Walk {
    /// Components (relative to the volume) that do not exist yet, shortest first.
    missing: Vec<String>,
    /// The path itself exists and is a directory.
    is_dir: bool,
}

/// Stats every component: none may be a symbolic link, all but the last
/// must be directories.
async fn walk(exec: &Executor, container: &str, path: &VolumePath) -> Result<Walk, Response> {
    let prefixes = path.prefixes();
    let parts = path.parts();
    for (i, abs) in prefixes.iter().enumerate() {
        let last = i + 1 == prefixes.len();
        match exec.stat_path(container, abs).await.map_err(exec_error)? {
            None => {
                let missing = (i..prefixes.len()).map(|n| parts[..=n].join("/")).collect();
                return Ok(Walk { missing, is_dir: false });
            }
            Some(s) if s.link_target.is_some() => {
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    format!("{abs} is a symbolic link; Gantry does not follow links in the volume"),
                ));
            }
            Some(s) if !last && !s.is_dir => {
                return Err(refuse(StatusCode::CONFLICT, format!("{abs} is a file, not a directory")));
            }
            Some(s) if last => return Ok(Walk { missing: Vec::new(), is_dir: s.is_dir }),
            Some(_) => {}
        }
    }
    Ok(Walk { missing: Vec::new(), is_dir: true })
}

struct Place {
    exec: Executor,
    container: String,
    session: Watched,
    user_id: i64,
    /// The machine as the audit log names it.
    machine: String,
    /// The client's address (`http::client_address::of`).
    client: Option<String>,
}

impl Place {
    /// One audit row for a transfer: who, which machine and path, from
    /// where, how many bytes (when known). A failure is logged only.
    async fn audit(&self, st: &WsState, action: &str, path: &VolumePath, bytes: Option<u64>) {
        let what = format!("{}: {}", self.machine, path.absolute());
        gantry_platform::audit::access(&st.app.pool, Some(self.user_id), action, &what, self.client.as_deref(), bytes)
            .await;
    }
}

async fn place(st: &WsState, parts: &Parts, id: i64) -> Result<(Target, Place), Response> {
    let (user, target) = enter(st, parts, id, false).await?;
    let (container, node) = match target.require_container() {
        Ok((c, n)) => (c.to_string(), n),
        Err(r) => return Err(refusal(r)),
    };
    let exec = executor(st, node, "files").await?;
    // A stopped machine's volume is mounted by the engine for each archive
    // call: first make sure its block device holds its own image.
    match exec.check_volumes(&container).await {
        Ok(Ok(())) => {}
        // The engine's own errors are answered as everywhere else.
        Err(e) => return Err(exec_error(e)),
        Ok(Err(e)) => {
            tracing::error!(machine = id, error = %e, "a stopped machine's data volume cannot be mounted safely; files refused");
            return Err(refuse(
                StatusCode::CONFLICT,
                format!(
                    "the data volume of machine {} cannot be opened while it is stopped: its disk on the node is not as Gantry left it \
                     (for example after the node restarted). Nothing was read or written; an administrator can find the details in the server log",
                    target.name
                ),
            ));
        }
    }
    let machine = format!("machine {} (#{}) of {}", target.name, target.machine_id, target.owner);
    let session = st.session_watch.watch_request(parts, &user);
    let client = crate::http::client_address::of(parts);
    Ok((target, Place { exec, container, session, user_id: user.id, machine, client }))
}

pub async fn download(
    State(st): State<WsState>,
    Path(id): Path<i64>,
    Query(q): Query<FileQuery>,
    req: Request,
) -> Response {
    let (parts, _body) = req.into_parts();
    let (_target, p) = match place(&st, &parts, id).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let path = match VolumePath::parse(q.path.as_deref().unwrap_or("")) {
        Ok(p) => p,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    match walk(&p.exec, &p.container, &path).await {
        Ok(w) if !w.missing.is_empty() => {
            return refuse(StatusCode::NOT_FOUND, format!("no such file: {}", path.absolute()))
        }
        Ok(_) => {}
        Err(r) => return r,
    }
    // Noted before the first byte goes out (a directory's archive has no
    // size until it has gone).
    match p.exec.download(&p.container, &path.absolute()).await {
        Ok(Download::File { name, size, body }) => {
            p.audit(&st, "files.download", &path, Some(size)).await;
            attachment(&name, "application/octet-stream", Some(size), p.session.cut(body))
        }
        Ok(Download::Directory { name, tar }) => {
            p.audit(&st, "files.download", &path, None).await;
            let name = if name.is_empty() || path.is_root() { "data".to_string() } else { name };
            attachment(&format!("{name}.tar"), "application/x-tar", None, p.session.cut(tar))
        }
        Err(ExecError::NotFound(_)) => refuse(StatusCode::NOT_FOUND, format!("no such file: {}", path.absolute())),
        Err(e) => exec_error(e),
    }
}

fn attachment(name: &str, content_type: &'static str, size: Option<u64>, body: ByteStream) -> Response {
    let body = Body::from_stream(body.map_err(|e| std::io::Error::other(e.to_string())));
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Already streamed as is: the compression layer leaves it alone.
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("identity"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(size) = size {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    if let Ok(v) = HeaderValue::from_str(&content_disposition(name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    res
}

/// `attachment; filename="ascii"; filename*=UTF-8''percent-encoded`.
fn content_disposition(name: &str) -> String {
    let ascii: String =
        name.chars().map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' { c } else { '_' }).collect();
    let encoded = gantry_core::url::encode(name);
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// `PUT /machines/{id}/files?path=dir/name`: the body is the file.
pub async fn upload_body(
    State(st): State<WsState>,
    Path(id): Path<i64>,
    Query(q): Query<FileQuery>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let (_target, p) = match place(&st, &parts, id).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let path = match VolumePath::parse(q.path.as_deref().unwrap_or("")) {
        Ok(p) if !p.is_root() => p,
        Ok(_) => return refuse(StatusCode::BAD_REQUEST, "say where the file goes: ?path=dir/name"),
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    let Some(size) =
        parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
    else {
        return refuse(StatusCode::LENGTH_REQUIRED, "an upload needs a Content-Length (or use the form upload)");
    };
    if size > st.limits.upload_max_bytes {
        return too_large(&st);
    }
    let stream = body.into_data_stream().map_err(|e| ExecError::Failed(format!("reading the upload: {e}"))).boxed();
    match put(&p, &path, size, stream).await {
        Ok(()) => {
            p.audit(&st, "files.upload", &path, Some(size)).await;
            Json(serde_json::json!({ "path": path.absolute(), "size": size })).into_response()
        }
        Err(r) => r,
    }
}

fn too_large(st: &WsState) -> Response {
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the file is larger than the upload limit of {} MiB", st.limits.upload_max_bytes / (1024 * 1024)),
    )
}

async fn put(p: &Place, path: &VolumePath, size: u64, body: ByteStream) -> Result<(), Response> {
    let w = walk(&p.exec, &p.container, path).await?;
    if w.is_dir {
        return Err(refuse(StatusCode::CONFLICT, format!("{} is a directory", path.absolute())));
    }
    // The directories to create: every missing component but the file.
    let mut missing = w.missing;
    missing.retain(|m| *m != path.relative());
    let upload = Upload {
        root: DATA_MOUNT.to_string(),
        missing_dirs: missing,
        path: path.relative(),
        size,
        body: p.session.clone().cut(body),
    };
    p.exec
        .upload(&p.container, upload)
        .await
        .map_err(|e| p.session.ended().map_or_else(|| exec_error(e), |ended| ended.refusal()))
}

/// `POST /machines/{id}/files` from the machine page's form (multipart:
/// `dir`, then `file`). A browser form post is answered by a redirect to
/// the machine page, which says what happened (kept in the session,
/// `http::outcomes`); other clients get JSON.
pub async fn upload_form(State(st): State<WsState>, Path(id): Path<i64>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let html = wants_html(&parts);
    let messages = parts.extensions.get::<Messages>().cloned();
    let back = |uploaded: Option<&str>, error: Option<&str>| {
        if let Some(messages) = &messages {
            let outcome = Outcome {
                endpoint: MACHINE_FILES.into(),
                error: error.map(str::to_string),
                answer: uploaded.map(str::to_string),
            };
            crate::http::outcomes::tell(messages, outcome);
        }
        Redirect::to(&format!("/machines/{id}#files")).into_response()
    };
    let result = form_upload(&st, id, parts, body).await;
    match (result, html) {
        (Ok((path, size)), false) => Json(serde_json::json!({ "path": path, "size": size })).into_response(),
        (Ok((path, _)), true) => back(Some(&path), None),
        (Err(r), false) => r,
        (Err(r), true) => {
            let status = r.status();
            let text = axum::body::to_bytes(r.into_body(), 4096)
                .await
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            back(None, Some(if text.is_empty() { status.as_str() } else { &text }))
        }
    }
}

/// The form's `dir` field: a path inside the volume (Linux's PATH_MAX).
const MAX_DIR_FIELD: usize = 4096;

/// Form uploads being spooled at once, per user and in all: each may put
/// up to the upload limit in a temporary file before the engine takes it,
/// so without a cap one user's parallel posts could fill the server's
/// temporary directory. (A `PUT` streams through and needs no spool.)
pub const SPOOLS_PER_USER: usize = 2;
pub const SPOOLS_MAX: usize = 8;

async fn form_upload(st: &WsState, id: i64, parts: Parts, body: Body) -> Result<(String, u64), Response> {
    let (_target, p) = place(st, &parts, id).await?;
    // Taken before a byte of the body is read, held until the file is in
    // the volume (or refused).
    let _spool = st.spool_slots.take(p.user_id, SPOOLS_MAX, SPOOLS_PER_USER).map_err(|full| match full {
        Full::User(n) => refuse(
            StatusCode::TOO_MANY_REQUESTS,
            format!("you have {n} form uploads on their way in, the limit per user; wait for one to finish"),
        ),
        Full::Server(n) => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("this server is receiving {n} form uploads, its limit; try again shortly"),
        ),
    })?;
    // This route has no body limit (files may be large): the guard bounds
    // what multer would otherwise buffer, and cuts a silent body.
    let (mut multipart, tripped) = crate::http::multipart_guard::multipart(
        Request::from_parts(parts, body),
        st,
        crate::http::multipart_guard::Limits::default(),
    )
    .await
    .map_err(|e| refuse(StatusCode::BAD_REQUEST, format!("not a form upload: {e}")))?;
    // A multer error after the guard cut the body: the guard's reason.
    let failed = |e: axum::extract::multipart::MultipartError| {
        refuse(StatusCode::BAD_REQUEST, tripped.reason().map_or_else(|| e.to_string(), |why| why.to_string()))
    };
    let mut dir = VolumePath::parse("").expect("the volume root parses");
    while let Some(mut field) = multipart.next_field().await.map_err(failed)? {
        match field.name() {
            Some("dir") => {
                // Read to a path's length at most: this route has no body
                // limit (files may be large), so a field read whole could
                // be gigabytes in memory.
                let mut text = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(failed)? {
                    if text.len() + chunk.len() > MAX_DIR_FIELD {
                        return Err(refuse(
                            StatusCode::BAD_REQUEST,
                            format!("the folder is longer than {MAX_DIR_FIELD} bytes"),
                        ));
                    }
                    text.extend_from_slice(&chunk);
                }
                let text =
                    String::from_utf8(text).map_err(|_| refuse(StatusCode::BAD_REQUEST, "the folder is not UTF-8"))?;
                dir = VolumePath::parse(&text).map_err(|e| refuse(StatusCode::BAD_REQUEST, e))?;
            }
            Some("file") => {
                let name = field.file_name().unwrap_or("").to_string();
                let path = dir.join_name(&name).map_err(|e| refuse(StatusCode::BAD_REQUEST, e))?;
                // Spool: the tar header needs the size before the bytes.
                let spool = tempfile::tempfile().map_err(internal)?;
                let mut spool = tokio::fs::File::from_std(spool);
                let mut size: u64 = 0;
                while let Some(chunk) = field.chunk().await.map_err(failed)? {
                    if let Some(ended) = p.session.ended() {
                        return Err(ended.refusal());
                    }
                    size += chunk.len() as u64;
                    if size > st.limits.upload_max_bytes {
                        return Err(too_large(st));
                    }
                    spool.write_all(&chunk).await.map_err(internal)?;
                }
                spool.flush().await.map_err(internal)?;
                spool.seek(std::io::SeekFrom::Start(0)).await.map_err(internal)?;
                put(&p, &path, size, file_stream(spool)).await?;
                p.audit(st, "files.upload", &path, Some(size)).await;
                return Ok((path.absolute(), size));
            }
            _ => {}
        }
    }
    Err(refuse(StatusCode::BAD_REQUEST, "the form has no file"))
}

fn file_stream(file: tokio::fs::File) -> ByteStream {
    stream::unfold((file, vec![0u8; 64 * 1024]), |(mut file, mut buf)| async move {
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => Some((Ok(Bytes::copy_from_slice(&buf[..n])), (file, buf))),
            Err(e) => Some((Err(ExecError::Failed(format!("reading the spooled upload: {e}"))), (file, buf))),
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    #[test]
    fn dispositions_are_safe() {
        assert_eq!(
            super::content_disposition("a b.txt"),
            "attachment; filename=\"a b.txt\"; filename*=UTF-8''a%20b.txt"
        );
        assert_eq!(super::content_disposition("é\"x"), "attachment; filename=\"__x\"; filename*=UTF-8''%C3%A9%22x");
    }
}
