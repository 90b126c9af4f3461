//! What a dataset request can be refused or fail with; each maps to one
//! HTTP status and a message for the person who asked.

use gantry_core::datasets::{DatasetRuleError, QuotaRefusal};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DatasetError {
    #[error(transparent)]
    Rule(#[from] DatasetRuleError),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Forbidden(String),
    /// Taken name, sealed version, upload in progress, wrong offset.
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Quota(#[from] QuotaRefusal),
    #[error("the file is larger than the upload limit of {limit} bytes")]
    TooLarge { limit: u64 },
    /// Another request is writing this upload now; try again shortly.
    #[error("{0}")]
    Busy(String),
    /// The file is being replaced: its stored bytes may be the new file's
    /// or the old one's for a moment; try again shortly.
    #[error("{0}")]
    Replacing(String),
    /// The body ended before its declared length (a cut connection).
    #[error("{0}")]
    Incomplete(String),
    #[error("{0}")]
    Checksum(String),
    /// A store failed; the message names it and what was undone.
    #[error("{0}")]
    Store(String),
    #[error("datasets are not configured on this server")]
    Unconfigured,
    #[error(transparent)]
    Platform(#[from] crate::PlatformError),
}

/// How messages name the two stores of a file: by role, never by what
/// or where they are.
pub(crate) const CENTRAL: &str = "the central store";
pub(crate) const REGION: &str = "the region's store";

/// The role of `Upload::stores[i]` (the central store first).
pub(crate) fn role(i: usize) -> &'static str {
    if i == 0 {
        CENTRAL
    } else {
        REGION
    }
}

impl From<sqlx::Error> for DatasetError {
    fn from(e: sqlx::Error) -> Self {
        DatasetError::Platform(e.into())
    }
}

impl DatasetError {
    pub fn status(&self) -> u16 {
        use crate::PlatformError as P;
        match self {
            DatasetError::Rule(_) | DatasetError::BadRequest(_) | DatasetError::Incomplete(_) => 400,
            DatasetError::Forbidden(_) => 403,
            DatasetError::NotFound(_) => 404,
            DatasetError::Conflict(_) | DatasetError::Busy(_) => 409,
            DatasetError::Quota(_) | DatasetError::TooLarge { .. } => 413,
            DatasetError::Checksum(_) => 422,
            DatasetError::Store(_) => 502,
            DatasetError::Unconfigured | DatasetError::Replacing(_) => 503,
            DatasetError::Platform(P::Invalid(_) | P::BadRequest(_)) => 400,
            DatasetError::Platform(P::NotFound(_)) => 404,
            DatasetError::Platform(P::Conflict(_) | P::Refused(_)) => 409,
            DatasetError::Platform(_) => 500,
        }
    }

    /// A store failed. The person reads `public`, which names stores by
    /// their role ([`CENTRAL`], [`REGION`]); `detail` — the store's own
    /// words, which carry its paths and endpoints — goes to the log only.
    pub fn store(public: impl Into<String>, detail: impl std::fmt::Display) -> Self {
        let public = public.into();
        tracing::warn!(detail = %detail, "dataset store failure: {public}");
        DatasetError::Store(public)
    }

    /// The text shown to the person; internal details stay in the log.
    pub fn public_message(&self) -> String {
        if self.status() == 500 {
            tracing::error!(error = %self, "dataset request failed");
            "something went wrong on the server; the error has been logged".into()
        } else {
            self.to_string()
        }
    }
}
