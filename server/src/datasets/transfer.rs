//! The two directions shared by the API and the browser routes: a body
//! streamed into both stores, and a file streamed out with `Range` (and
//! `If-Range`). Either stops when the right it began with ends meanwhile
//! ([`Access`]): the page's routes come with the session, the API's with a
//! token or the session ([`super::api`]).

use super::error_json;
use axum::{
    body::Body,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use futures_util::{StreamExt, TryStreamExt};
use gantry_core::datasets::{byte_range, range_applies, ByteRange};
use gantry_platform::{
    accounts::User,
    datasets::{
        self, access::Access, store::ByteStream, BeginUpload, DatasetError, Datasets, UploadState,
    },
    db::Pool,
};
use std::time::{Duration, Instant};

/// What the client declared about a one-request upload.
pub struct Put<'a> {
    pub code: &'a str,
    pub version: &'a str,
    pub name: &'a str,
    pub replace: bool,
}

pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// The client's own SHA-256 of the file, if it sent one: checked before listing.
pub fn client_sha256(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-gantry-sha256")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
}

/// Streams `body` into both stores in a task of its own: if the client
/// goes away, the handler's future is dropped, but the task still sees the
/// body end early and removes what it wrote.
pub async fn put_as(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    access: Access,
    p: Put<'_>,
    headers: &HeaderMap,
    body: Body,
) -> Result<datasets::FileView, DatasetError> {
    let begin = BeginUpload {
        code: p.code,
        version: p.version,
        name: p.name,
        replace: p.replace,
        total: content_length(headers),
        resumable: false,
    };
    let upload = datasets::begin_upload(pool, stores, user, &begin).await?;
    let expected = client_sha256(headers);
    let pool = pool.clone();
    let task = tokio::spawn(async move {
        let stream = body.into_data_stream().map_err(std::io::Error::other);
        datasets::write_upload_as(&pool, &upload, 0, stream, expected.as_deref(), access).await
    });
    match task.await {
        Ok(Ok(UploadState::Done(file))) => Ok(file),
        Ok(Ok(UploadState::Partial { .. })) => {
            Err(DatasetError::Incomplete("the upload ended early".into()))
        }
        Ok(Err(e)) => Err(e),
        Err(e) => Err(DatasetError::store(
            "the upload failed on the server",
            format!("upload task: {e}"),
        )),
    }
}

/// The file's bytes from the central store (the region's copy if the
/// central one cannot be read), whole or the requested range — the range
/// only while `If-Range`, if sent, names this very file — cut short if
/// `access` ends while they go out.
#[allow(clippy::too_many_arguments)]
pub async fn download_as(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    access: Access,
    code: &str,
    version: &str,
    name: &str,
    headers: &HeaderMap,
) -> Response {
    let (d, file) = match datasets::file(pool, user, code, version, name).await {
        Ok(x) => x,
        Err(e) => return error_json(&e),
    };
    // A public dataset's download rests on the account alone; a private
    // one's on the membership of its group, or on being an admin.
    let access = access.reading(user, d.group_id, d.visibility == "public");
    let key = gantry_core::datasets::storage_key(&d.code, version, &d.category, &file.name);
    let size = file.size.max(0) as u64;
    let etag = format!("\"{}\"", file.sha256);
    // A validator that is not text cannot be this file's tag either.
    let if_range = headers
        .get(header::IF_RANGE)
        .map(|v| v.to_str().unwrap_or_default());
    let asked = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .filter(|_| range_applies(if_range, &etag));
    let range = byte_range(asked, size);
    let (status, span) = match range {
        ByteRange::Whole => (StatusCode::OK, None),
        ByteRange::Part { start, end } => (StatusCode::PARTIAL_CONTENT, Some((start, end))),
        ByteRange::Unsatisfiable => {
            let mut res = (
                StatusCode::RANGE_NOT_SATISFIABLE,
                "the range starts beyond the end of the file",
            )
                .into_response();
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
        Err(e) => {
            return error_json(&DatasetError::store(
                "reading the file failed in the central store and in the region's store",
                format!("{key}: {e}"),
            ))
        }
    };
    let length = span.map(|(s, e)| e - s + 1).unwrap_or(size);
    let mut res =
        Body::from_stream(while_access_holds(pool.clone(), access, stream)).into_response();
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    // Streamed as stored: the compression layer leaves it alone.
    h.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if let Ok(v) = HeaderValue::from_str(&etag) {
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

/// A download looks again at its reader's right after this many bytes…
const RECHECK_BYTES: u64 = 16 << 20;
/// …or this long, whichever comes first. Both are counted as the bytes go
/// out: a download nobody reads costs nothing.
const RECHECK_EVERY: Duration = Duration::from_secs(2);

/// `bytes`, ended by an error (the client sees the download cut short:
/// its length was promised) once `access` no longer holds.
fn while_access_holds(pool: Pool, access: Access, bytes: ByteStream) -> ByteStream {
    struct Sending {
        bytes: ByteStream,
        pool: Pool,
        access: Access,
        since: u64,
        looked: Instant,
    }
    let sending = Sending {
        bytes,
        pool,
        access,
        since: 0,
        looked: Instant::now(),
    };
    Box::pin(futures_util::stream::unfold(
        Some(sending),
        |sending| async move {
            let mut s = sending?;
            if s.since >= RECHECK_BYTES || s.looked.elapsed() >= RECHECK_EVERY {
                match s.access.holds(&s.pool).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::info!(
                            "a dataset download was cut short: its reader's access ended"
                        );
                        return Some((
                            Err(std::io::Error::new(
                                std::io::ErrorKind::PermissionDenied,
                                "the reader's access ended",
                            )),
                            None,
                        ));
                    }
                    // No verdict: looked at again after as many bytes.
                    Err(e) => tracing::warn!(error = %e, "could not look at a downloader's access"),
                }
                (s.since, s.looked) = (0, Instant::now());
            }
            let next = s.bytes.next().await?;
            if let Ok(chunk) = &next {
                s.since += chunk.len() as u64;
            }
            Some((next, Some(s)))
        },
    ))
}

/// `attachment; filename="ascii"; filename*=UTF-8''percent-encoded`.
fn content_disposition(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded: String = name
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}
