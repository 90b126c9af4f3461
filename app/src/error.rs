//! The one error type server functions return. It crosses the wire as JSON,
//! so the browser shows the same message the server wrote, and on the
//! server it also sets the HTTP status.

use leptos::server_fn::{self, codec::JsonEncoding, error::FromServerFnError, ServerFnError};
use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Error)]
pub enum AppError {
    #[error("{0}")]
    Invalid(String),
    #[error("please sign in")]
    Unauthorized,
    #[error("wrong username or password")]
    BadCredentials,
    #[error("only administrators may do this")]
    Forbidden,
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Throttled(String),
    /// The scheduler refused (quota, permissions, capacity).
    #[error("{0}")]
    Refused(String),
    /// Shown only as [`INTERNAL_TEXT`] (with the request id): whatever
    /// detail a server function put here goes to the log, never to a client.
    #[error("{}", public_internal(.0))]
    Internal(String),
}

/// What a client sees of any internal failure.
pub const INTERNAL_TEXT: &str = "something went wrong on the server; the error has been logged";

fn public_internal(s: &str) -> &str {
    if s.starts_with(INTERNAL_TEXT) {
        s
    } else {
        INTERNAL_TEXT
    }
}

/// Marks a rendered page that met an internal error, so the server's page
/// cache does not serve it again; the cache removes it before answering.
pub const NOT_KEPT_HEADER: &str = "x-gantry-not-kept";

/// The id the server gave this request (the `X-Request-Id` header); error
/// messages name it so a report can be matched with the log.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

impl AppError {
    /// An internal failure: `detail` goes to the log with the request id;
    /// the client gets [`INTERNAL_TEXT`] and that id.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        let id = leptos::prelude::use_context::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<RequestId>().map(|r| r.0.clone()))
            .unwrap_or_else(|| "none".into());
        tracing::error!(request_id = %id, error = %detail, "request failed");
        // A page that shows this is not served again (`page_cache`).
        if let Some(opts) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            opts.insert_header(http::HeaderName::from_static(NOT_KEPT_HEADER), http::HeaderValue::from_static("1"));
        }
        AppError::Internal(format!("{INTERNAL_TEXT} (request id {id})")).respond()
    }

    pub fn status(&self) -> u16 {
        match self {
            AppError::Invalid(_) => 400,
            AppError::Unauthorized | AppError::BadCredentials => 401,
            AppError::Forbidden => 403,
            AppError::NotFound(_) => 404,
            AppError::Conflict(_) | AppError::Refused(_) => 409,
            AppError::Throttled(_) => 429,
            AppError::Internal(_) => 500,
        }
    }

    /// Also makes this the response's status code — except
    /// for a plain HTML form post (no JavaScript), which must get the
    /// redirect back to its page that carries the error.
    pub fn respond(self) -> Self {
        let form_post = leptos::prelude::use_context::<http::request::Parts>().is_some_and(|p| {
            p.headers.get(http::header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html"))
        });
        if form_post {
            return self;
        }
        if let Some(opts) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            if let Ok(code) = http::StatusCode::from_u16(self.status()) {
                opts.set_status(code);
            }
        }
        self
    }
}

/// The parser's message about arguments that do not parse, without what the
/// caller wrote: it quotes keys and values (`Multiple values for one key:
/// "…"`, ``unknown variant `…` ``) without escaping them, so where a quote
/// ends cannot be told, and the answer may come back signed in a page's
/// error box (no-JS forms) — anyone could make the server sign a text of
/// theirs. So the message stops at its first quote; only a missing field
/// keeps its name (the function's own, never the caller's).
pub fn argument_error_text(msg: &str) -> String {
    let plain = |f: &str| !f.is_empty() && f.len() <= 32 && f.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if let Some(field) = msg.strip_prefix("missing field `").and_then(|r| r.strip_suffix('`')).filter(|f| plain(f)) {
        return format!("missing field `{field}`");
    }
    let cut = msg.find(['"', '`', '\'']).unwrap_or(msg.len());
    let mut out: String = msg[..cut].chars().filter(|c| !c.is_control()).take(160).collect();
    if cut < msg.len() {
        out = out.trim_end().to_string();
        out.push_str(" …");
    }
    out
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    /// Arguments that do not parse are the caller's fault (400, naming
    /// what was wrong); anything else is internal.
    fn from_server_fn_error(value: server_fn::error::ServerFnErrorErr) -> Self {
        use server_fn::error::ServerFnErrorErr as E;
        match value {
            E::Args(msg) | E::MissingArg(msg) | E::Deserialization(msg) => {
                AppError::Invalid(format!("bad request: {}", argument_error_text(&msg))).respond()
            }
            other => AppError::internal(other),
        }
    }

    /// Never lets an internal detail out, even one a server function built
    /// by hand: it is logged and replaced by the generic text.
    fn ser(&self) -> leptos::server_fn::Bytes {
        use leptos::server_fn::Encodes;
        let clean = match self {
            AppError::Internal(s) if !s.starts_with(INTERNAL_TEXT) => AppError::internal(s),
            other => other.clone(),
        };
        JsonEncoding::encode(&clean).unwrap_or_default()
    }

    fn de(data: leptos::server_fn::Bytes) -> Self {
        use leptos::server_fn::{error::IntoAppError, Decodes};
        JsonEncoding::decode(data)
            .unwrap_or_else(|e| server_fn::error::ServerFnErrorErr::Deserialization(e.to_string()).into_app_error())
    }
}

impl From<ServerFnError> for AppError {
    fn from(e: ServerFnError) -> Self {
        AppError::internal(e)
    }
}

impl From<gantry_core::ValidationError> for AppError {
    fn from(e: gantry_core::ValidationError) -> Self {
        AppError::Invalid(e.to_string()).respond()
    }
}

impl From<gantry_platform::PlatformError> for AppError {
    fn from(e: gantry_platform::PlatformError) -> Self {
        use gantry_platform::PlatformError as P;
        let err = match e {
            P::Invalid(v) => AppError::Invalid(v.to_string()),
            P::BadRequest(msg) => AppError::Invalid(msg),
            P::Refused(msg) => AppError::Refused(msg),
            P::BadCredentials => AppError::BadCredentials,
            e @ P::Throttled { .. } => AppError::Throttled(e.to_string()),
            P::NotFound(what) => AppError::NotFound(format!("{what} not found")),
            P::Conflict(msg) => AppError::Conflict(msg),
            e @ (P::Database(_) | P::Internal(_) | P::LeaseLost(_)) => AppError::internal(e),
        };
        err.respond()
    }
}

#[cfg(test)]
mod argument_error_tests {
    use super::argument_error_text;

    #[test]
    fn the_callers_words_are_not_repeated_but_field_names_are() {
        assert_eq!(
            argument_error_text(r#"Multiple values for one key: "Security notice: reset at evil.example""#),
            "Multiple values for one key: …"
        );
        // A quote of its own in the key cannot end the quote early.
        let sneaky = r#"Multiple values for one key: "x"Sign in again at https://evil.example/login"""#;
        assert!(!argument_error_text(sneaky).contains("evil"), "{}", argument_error_text(sneaky));
        assert_eq!(
            argument_error_text("unknown variant `call +1 555 now`, expected `user` or `admin`"),
            "unknown variant …"
        );
        assert_eq!(argument_error_text("missing field `machine_id`"), "missing field `machine_id`");
        assert!(!argument_error_text("missing field `x` and then evil`").contains("evil"));
        assert_eq!(argument_error_text("invalid digit found in string"), "invalid digit found in string");
        assert!(argument_error_text(&"x".repeat(500)).chars().count() <= 160);
    }
}
