//! The API's one error shape: `{"error": "what happened, in words", "code":
//! "stable_word"}` with the HTTP status, on every `/api/v1` answer that
//! refuses (datasets' routes too). `error` was the only key before codes
//! came, so scripts that read it keep working; `code` is what a script
//! should branch on — the words may change, the codes do not.
//!
//! | code | status | when |
//! |---|---|---|
//! | `bad_request` | 400 | malformed JSON, an unknown field, a bad id or value; nothing was changed |
//! | `unauthorized` | 401 | no valid token (unknown, revoked, expired) |
//! | `bad_credentials` | 401 | a wrong password where one is asked for |
//! | `insufficient_scope` | 403 | the token's scope does not allow it (a `read` token writing; an admin route without an `admin` token) |
//! | `forbidden` | 403 | the account may not do it (an admin route for a non-admin; an admin token for a non-admin) |
//! | `not_found` | 404 | nothing of that id that the caller may see (another group's is "not found" too) |
//! | `no_such_path` | 404 | no API route has that path |
//! | `method_not_allowed` | 405 | the path does not take that method (`Allow` lists what it takes) |
//! | `conflict` | 409 | the thing's state does not allow it now (the message says why) |
//! | `refused` | 409 | a rule said no: quota, room, policy — the message has the numbers |
//! | `payload_too_large` | 413 | the body is over the limit |
//! | `unsupported_media_type` | 415 | a JSON body without `Content-Type: application/json` |
//! | `rate_limited` | 429 | over the token's rate; `Retry-After` says in how many seconds to try again |
//! | `throttled` | 429 | too many wrong passwords; `Retry-After` as well |
//! | `internal` | 500 | the server failed; it is logged |
//! | `unavailable` | 503 | a service this route needs is not configured or is busy |
//!
//! Datasets add `quota_exceeded`, `too_large` (413), `busy`, `replacing`,
//! `incomplete`, `checksum_mismatch`, `store_failed` ([`dataset_code`]).

use axum::{
    extract::rejection::{JsonRejection, PathRejection, QueryRejection},
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use gantry_platform::{datasets::DatasetError, PlatformError};
use serde::Serialize;

/// An API refusal: the status, the stable code and the words.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds for `Retry-After` (429, some 503s).
    pub retry_after: Option<u64>,
}

/// The body of every refusal (documented in the OpenAPI document).
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What happened, in words (may change between versions).
    pub error: String,
    /// A stable word to branch on (see the README's table).
    pub code: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), retry_after: None }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid API token is required: Authorization: Bearer <token>",
        )
    }
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, message)
    }
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }
    /// A JSON body that could not be read: 400 (413 when too big, 415
    /// without the JSON content type), saying what was wrong.
    pub fn body(e: JsonRejection, what: &str) -> Self {
        let status = e.status();
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            _ => "bad_request",
        };
        let status = if code == "bad_request" { StatusCode::BAD_REQUEST } else { status };
        Self::new(status, code, format!("the body must be {what} in JSON: {}", e.body_text()))
    }
    /// An id in the path that is not one: 400.
    pub fn path(_: PathRejection, example: &str) -> Self {
        Self::bad_request(format!("an id in the path is a whole number (as in {example})"))
    }
    pub fn query(e: QueryRejection) -> Self {
        Self::bad_request(format!("the query string is malformed: {}", e.body_text()))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: self.message, code: self.code.to_string() };
        let mut res = no_store((self.status, Json(body)).into_response());
        if let Some(secs) = self.retry_after {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

/// `{"error": "…", "code": "…"}` with the status and the code that status
/// has when nothing more precise is known.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    ApiError::new(status, status_code(status), message).into_response()
}

/// The code of a status when nothing more precise is known.
pub fn status_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        409 => "conflict",
        413 => "payload_too_large",
        415 => "unsupported_media_type",
        429 => "rate_limited",
        503 => "unavailable",
        _ if status.is_server_error() => "internal",
        _ => "bad_request",
    }
}

pub fn no_store(mut res: Response) -> Response {
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

impl From<PlatformError> for ApiError {
    fn from(e: PlatformError) -> Self {
        let (status, code) = match &e {
            PlatformError::Invalid(_) | PlatformError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            PlatformError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            PlatformError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            PlatformError::Refused(_) => (StatusCode::CONFLICT, "refused"),
            PlatformError::BadCredentials => (StatusCode::UNAUTHORIZED, "bad_credentials"),
            PlatformError::Throttled { retry_after_secs, .. } => {
                let secs = (*retry_after_secs).max(1) as u64;
                return ApiError::new(StatusCode::TOO_MANY_REQUESTS, "throttled", e.to_string()).retry_after(secs);
            }
            PlatformError::Database(_) | PlatformError::Internal(_) | PlatformError::LeaseLost(_) => {
                tracing::error!(error = %e, "API request failed");
                return ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "something went wrong on the server; the error has been logged",
                );
            }
        };
        ApiError::new(status, code, e.to_string())
    }
}

/// A dataset refusal's code.
pub fn dataset_code(e: &DatasetError) -> &'static str {
    match e {
        DatasetError::Rule(_) | DatasetError::BadRequest(_) => "bad_request",
        DatasetError::Incomplete(_) => "incomplete",
        DatasetError::Forbidden(_) => "forbidden",
        DatasetError::NotFound(_) => "not_found",
        DatasetError::Conflict(_) => "conflict",
        DatasetError::Busy(_) => "busy",
        DatasetError::Quota(_) => "quota_exceeded",
        DatasetError::TooLarge { .. } => "too_large",
        DatasetError::Checksum(_) => "checksum_mismatch",
        DatasetError::Store(_) => "store_failed",
        DatasetError::Unconfigured => "unavailable",
        DatasetError::Replacing(_) => "replacing",
        DatasetError::Platform(PlatformError::Refused(_)) => "refused",
        DatasetError::Platform(_) => {
            status_code(StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        }
    }
}

impl From<DatasetError> for ApiError {
    fn from(e: DatasetError) -> Self {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError::new(status, dataset_code(&e), e.public_message())
    }
}
