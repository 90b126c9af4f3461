//! The two directions shared by the API and the browser routes: a body
//! streamed into both stores, and a file streamed out with `Range`.

use super::error_json;
use axum::{
    body::Body,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use futures_util::TryStreamExt;
use gantry_core::datasets::{byte_range, ByteRange};
use gantry_platform::{
    accounts::User,
    datasets::{self, BeginUpload, DatasetError, Datasets, UploadState},
    db::Pool,
};

/// What the client declared about a one-request upload.
pub struct Put<'a> {
    pub code: &'a str,
    pub version: &'a str,
    pub name: &'a str,
    pub replace: bool,
}

pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
}

/// The client's own SHA-256 of the file, if it sent one: checked before listing.
pub fn client_sha256(headers: &HeaderMap) -> Option<String> {
    headers.get("x-gantry-sha256").and_then(|v| v.to_str().ok()).map(|v| v.trim().to_ascii_lowercase())
}

/// Streams `body` into both stores in a task of its own: if the client
/// goes away, the handler's future is dropped, but the task still sees the
/// body end early and removes what it wrote.
pub async fn put(pool: &Pool, stores: &Datasets, user: &User, p: Put<'_>, headers: &HeaderMap, body: Body) -> Result<datasets::FileView, DatasetError> {
    let begin = BeginUpload { code: p.code, version: p.version, name: p.name, replace: p.replace, total: content_length(headers), resumable: false };
    let upload = datasets::begin_upload(pool, stores, user, &begin).await?;
    let expected = client_sha256(headers);
    let pool = pool.clone();
    let task = tokio::spawn(async move {
        let stream = body.into_data_stream().map_err(std::io::Error::other);
        datasets::write_upload(&pool, &upload, 0, stream, expected.as_deref()).await
    });
    match task.await {
        Ok(Ok(UploadState::Done(file))) => Ok(file),
        Ok(Ok(UploadState::Partial { .. })) => Err(DatasetError::Incomplete("the upload ended early".into())),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(DatasetError::store("the upload failed on the server", format!("upload task: {e}"))),
    }
}

/// The file's bytes from the central store (the region's copy if the
/// central one cannot be read), whole or the requested range.
pub async fn download(pool: &Pool, stores: &Datasets, user: &User, code: &str, version: &str, name: &str, headers: &HeaderMap) -> Response {
    let (d, file) = match datasets::file(pool, user, code, version, name).await {
        Ok(x) => x,
        Err(e) => return error_json(&e),
    };
    let key = gantry_core::datasets::storage_key(&d.code, version, &d.category, &file.name);
    let size = file.size.max(0) as u64;
    let range = byte_range(headers.get(header::RANGE).and_then(|v| v.to_str().ok()), size);
    let (status, span) = match range {
        ByteRange::Whole => (StatusCode::OK, None),
        ByteRange::Part { start, end } => (StatusCode::PARTIAL_CONTENT, Some((start, end))),
        ByteRange::Unsatisfiable => {
            let mut res = (StatusCode::RANGE_NOT_SATISFIABLE, "the range starts beyond the end of the file").into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                res.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return res;
        }
    };
    // An empty file has no byte to ask a store for.
    let stream = if size == 0 {
        Ok(Box::pin(futures_util::stream::empty()) as gantry_platform::datasets::store::ByteStream)
    } else {
        let stores_of = match datasets::stores_of(stores, &d) {
            Ok(s) => s,
            Err(e) => return error_json(&e),
        };
        let first = stores_of[0].get(&key, span).await;
        match first {
            Ok(s) => Ok(s),
            Err(e) => {
                tracing::warn!(error = %e, %key, "central copy unreadable; serving the region's");
                stores_of[1].get(&key, span).await
            }
        }
    };
    let stream = match stream {
        Ok(s) => s,
        Err(e) => return error_json(&DatasetError::store("reading the file failed in the central store and in the region's store", format!("{key}: {e}"))),
    };
    let length = span.map(|(s, e)| e - s + 1).unwrap_or(size);
    let mut res = Body::from_stream(stream).into_response();
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    // Streamed as stored: the compression layer leaves it alone.
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("identity"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", file.sha256)) {
        h.insert(header::ETAG, v);
    }
    if let Some((start, end)) = span {
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{size}")) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    let base = file.name.rsplit('/').next().unwrap_or(&file.name);
    if let Ok(v) = HeaderValue::from_str(&content_disposition(base)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    res
}

/// `attachment; filename="ascii"; filename*=UTF-8''percent-encoded`.
fn content_disposition(name: &str) -> String {
    let ascii: String = name.chars().map(|c| if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' { c } else { '_' }).collect();
    let encoded: String = name
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}
