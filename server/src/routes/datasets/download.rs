//! A listed file streamed out, whole or a `Range` of it (honoured only
//! while `If-Range`, if sent, names this very file), for the API and the
//! version page's link alike; cut short when the reader's right ends
//! meanwhile ([`Access`]).
//!
//! The `ETag` and the length promised are the listed row's, and the bytes
//! are that file's: the file is opened between two reads of its row, and
//! a replace that came between is noticed and the whole read again, for a
//! moment, before the download is refused ([`datasets::reading`]).

use super::error_json;
use super::range::{byte_range, range_applies, ByteRange};
use axum::{
    body::Body,
    http::{header, request::Parts, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use futures_util::StreamExt;
use gantry_platform::{
    accounts::User,
    datasets::{self, access::Access, reading::being_replaced, store::ByteStream, DatasetError, Datasets, Listed},
    db::Pool,
};
use std::time::{Duration, Instant};

/// A replace's moves take a moment (a rename per store in a directory, a
/// copy per store in a bucket): a download that meets one looks again
/// every `WAIT_STEP` for this long before it is refused (503, try again).
const WAIT_FOR_PLACING: Duration = Duration::from_secs(2);
const WAIT_STEP: Duration = Duration::from_millis(50);

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
    parts: &Parts,
) -> Response {
    let headers = &parts.headers;
    let until = Instant::now() + WAIT_FOR_PLACING;
    loop {
        let listed = match datasets::listed_file(pool, user, code, version, name).await {
            Ok(l) => Some(l),
            Err(DatasetError::Replacing(_)) => None,
            Err(e) => return error_json(&e),
        };
        if let Some(listed) = listed {
            let opened = match open(stores, &listed, version, headers).await {
                Ok(o) => o,
                Err(res) => return res,
            };
            match listed.still_listed(pool).await {
                Ok(true) => {
                    audit(pool, user, parts, &listed, version, opened.span).await;
                    return respond(pool, user, access, listed, opened);
                }
                // Opened beside a replace: the bytes may not be the row's.
                Ok(false) => {}
                Err(e) => return error_json(&e),
            }
        }
        if Instant::now() >= until {
            return error_json(&being_replaced(name));
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
}

/// What [`open`] found: the answer's status, the range (inclusive) if one
/// applies, and the bytes, opened.
struct Opened {
    status: StatusCode,
    span: Option<(u64, u64)>,
    bytes: ByteStream,
}

/// Opens the listed file's bytes in the central store, or in the region's
/// if the central copy cannot be read; a range asked for beyond the end is
/// answered here (416).
async fn open(stores: &Datasets, listed: &Listed, version: &str, headers: &HeaderMap) -> Result<Opened, Response> {
    let (d, file) = (&listed.dataset, &listed.file);
    let key = gantry_core::datasets::storage_key(&d.code, version, &d.category, &file.name);
    let size = file.size.max(0) as u64;
    let etag = etag(listed);
    // A validator that is not text cannot be this file's tag either.
    let if_range = headers.get(header::IF_RANGE).map(|v| v.to_str().unwrap_or_default());
    let asked = headers.get(header::RANGE).and_then(|v| v.to_str().ok()).filter(|_| range_applies(if_range, &etag));
    let (status, span) = match byte_range(asked, size) {
        ByteRange::Whole => (StatusCode::OK, None),
        ByteRange::Part { start, end } => (StatusCode::PARTIAL_CONTENT, Some((start, end))),
        ByteRange::Unsatisfiable => {
            let mut res =
                (StatusCode::RANGE_NOT_SATISFIABLE, "the range starts beyond the end of the file").into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                res.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return Err(res);
        }
    };
    // An empty file has no byte to ask a store for.
    if size == 0 {
        return Ok(Opened { status, span, bytes: Box::pin(futures_util::stream::empty()) });
    }
    let stores_of = datasets::stores_of(stores, d).map_err(|e| error_json(&e))?;
    let bytes = match stores_of[0].get(&key, span).await {
        Ok(s) => Ok(s),
        Err(e) => {
            tracing::warn!(error = %e, %key, "central copy unreadable; serving the region's");
            stores_of[1].get(&key, span).await
        }
    };
    let bytes = bytes.map_err(|e| {
        error_json(&DatasetError::store(
            "reading the file failed in the central store and in the region's store",
            format!("{key}: {e}"),
        ))
    })?;
    Ok(Opened { status, span, bytes })
}

/// One audit row, before the first byte goes out: who, which file of
/// which version (and which bytes of it, for a range), from where, how
/// many bytes. A failure is logged only.
async fn audit(pool: &Pool, user: &User, parts: &Parts, listed: &Listed, version: &str, span: Option<(u64, u64)>) {
    let size = listed.file.size.max(0) as u64;
    let mut what = format!("dataset {} version {version}: {}", listed.dataset.code, listed.file.name);
    if let Some((start, end)) = span {
        what.push_str(&format!(" (bytes {start}-{end} of {size})"));
    }
    let bytes = span.map(|(s, e)| e - s + 1).unwrap_or(size);
    let client = crate::http::client_address::of(parts);
    gantry_platform::audit::access(pool, Some(user.id), "dataset.download", &what, client.as_deref(), Some(bytes))
        .await;
}

fn etag(listed: &Listed) -> String {
    format!("\"{}\"", listed.file.sha256)
}

/// The answer: the opened bytes under the listed file's headers.
fn respond(pool: &Pool, user: &User, access: Access, listed: Listed, opened: Opened) -> Response {
    let d = &listed.dataset;
    let file = &listed.file;
    // A public dataset's download rests on the account alone; a private
    // one's on the membership of its group, or on being an admin.
    let access = access.reading(user, d.group_id, d.visibility == gantry_core::datasets::Visibility::Public);
    let size = file.size.max(0) as u64;
    let length = opened.span.map(|(s, e)| e - s + 1).unwrap_or(size);
    let mut res = Body::from_stream(while_access_holds(pool.clone(), access, opened.bytes)).into_response();
    *res.status_mut() = opened.status;
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    // Streamed as stored: the compression layer leaves it alone.
    h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("identity"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if let Ok(v) = HeaderValue::from_str(&etag(&listed)) {
        h.insert(header::ETAG, v);
    }
    if let Some((start, end)) = opened.span {
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
    let sending = Sending { bytes, pool, access, since: 0, looked: Instant::now() };
    Box::pin(futures_util::stream::unfold(Some(sending), |sending| async move {
        let mut s = sending?;
        if s.since >= RECHECK_BYTES || s.looked.elapsed() >= RECHECK_EVERY {
            match s.access.holds(&s.pool).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!("a dataset download was cut short: its reader's access ended");
                    return Some((
                        Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "the reader's access ended")),
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
    }))
}

/// `attachment; filename="ascii"; filename*=UTF-8''percent-encoded`.
fn content_disposition(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' { c } else { '_' })
        .collect();
    let encoded = gantry_core::url::encode(name);
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}
