use gantry_core::ValidationError;
use thiserror::Error;

/// Everything the platform can refuse or fail with. Messages are written for
/// the person who made the request; database details stay in the logs.
#[derive(Debug, Error)]
pub enum PlatformError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("wrong username or password")]
    BadCredentials,
    /// Too many failed sign-ins for this account from this client (or from
    /// this client), or — `busy` — too many passwords being checked at once.
    #[error("{}", throttled_message(*retry_after_secs, *busy))]
    Throttled { retry_after_secs: i64, busy: bool },
    #[error("{0}")]
    BadRequest(String),
    /// The scheduling core said no; the message names the rule and numbers.
    #[error("{0}")]
    Refused(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// The task's lease passed to another process (or the task was ended
    /// by an admin, e.g. its node was marked lost): stop working on it.
    #[error("lease lost: {0}")]
    LeaseLost(String),
    #[error("database error")]
    Database(#[source] sqlx::Error),
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<sqlx::Error> for PlatformError {
    fn from(e: sqlx::Error) -> Self {
        tracing::error!(error = %e, "database error");
        PlatformError::Database(e)
    }
}

/// A stored word (a state, a kind) that the core does not know: the row was
/// written by something else, so it is the server's problem, not the user's.
impl From<gantry_core::task::UnknownVariant> for PlatformError {
    fn from(e: gantry_core::task::UnknownVariant) -> Self {
        PlatformError::Internal(e.to_string())
    }
}

impl From<sqlx::migrate::MigrateError> for PlatformError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        PlatformError::Internal(format!("migration failed: {e}"))
    }
}

fn throttled_message(retry_after_secs: i64, busy: bool) -> String {
    if busy {
        format!("the server is busy checking sign-ins; try again in {retry_after_secs} second(s)")
    } else {
        format!("too many failed sign-in attempts; try again in {} minute(s)", (retry_after_secs + 59) / 60)
    }
}

/// True when a write failed on a UNIQUE constraint, e.g. a taken name.
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}
