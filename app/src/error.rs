//! The one error type server functions return. It crosses the wire as JSON,
//! so the browser shows the same message the server wrote, and on the
//! server it also sets the HTTP status.

use serde::{Deserialize, Serialize};
use leptos::server_fn::{self, codec::JsonEncoding, error::FromServerFnError, ServerFnError};
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
    #[error("{0}")]
    Internal(String),
}

impl AppError {
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

    /// On the server, also make this the response's status code — except
    /// for a plain HTML form post (no JavaScript), which must get the
    /// redirect back to its page that carries the error.
    pub fn respond(self) -> Self {
        #[cfg(feature = "ssr")]
        let form_post = leptos::prelude::use_context::<http::request::Parts>().is_some_and(|p| {
            p.headers.get(http::header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html"))
        });
        #[cfg(feature = "ssr")]
        if form_post {
            return self;
        }
        #[cfg(feature = "ssr")]
        if let Some(opts) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            if let Ok(code) = http::StatusCode::from_u16(self.status()) {
                opts.set_status(code);
            }
        }
        self
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: server_fn::error::ServerFnErrorErr) -> Self {
        AppError::Internal(value.to_string())
    }
}

impl From<ServerFnError> for AppError {
    fn from(e: ServerFnError) -> Self {
        AppError::Internal(e.to_string())
    }
}

impl From<gantry_core::ValidationError> for AppError {
    fn from(e: gantry_core::ValidationError) -> Self {
        AppError::Invalid(e.to_string()).respond()
    }
}

#[cfg(feature = "ssr")]
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
            e @ (P::Database(_) | P::Internal(_) | P::LeaseLost(_)) => {
                tracing::error!(error = %e, "server function failed");
                AppError::Internal("something went wrong on the server; the error has been logged".into())
            }
        };
        err.respond()
    }
}
