//! Failed-login bookkeeping in the database, so the limit holds across
//! restarts and server replicas. The policy itself is `gantry_core::throttle`.

use crate::{db::Pool, now, PlatformError};
use gantry_core::throttle::{FailureRecord, ThrottlePolicy, Verdict};

/// The keys one login attempt counts against, each with its policy.
pub fn keys(username: &str, address: Option<&str>) -> Vec<(String, ThrottlePolicy)> {
    let mut keys = vec![(format!("user:{}", username.to_lowercase()), ThrottlePolicy::PER_USER)];
    if let Some(addr) = address {
        keys.push((format!("addr:{addr}"), ThrottlePolicy::PER_ADDRESS));
    }
    keys
}

async fn load(pool: &Pool, key: &str) -> Result<Option<FailureRecord>, PlatformError> {
    let row: Option<(i64, i64)> = sqlx::query_as("SELECT failures, window_start FROM login_failures WHERE key = ?")
        .bind(key)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|(f, w)| FailureRecord { failures: f as u32, window_start: w }))
}

/// Refuses with `Throttled` when any key is locked.
pub async fn check(pool: &Pool, keys: &[(String, ThrottlePolicy)]) -> Result<(), PlatformError> {
    let now = now();
    for (key, policy) in keys {
        if let Verdict::Locked { retry_after_secs } = policy.verdict(load(pool, key).await?, now) {
            return Err(PlatformError::Throttled { retry_after_secs });
        }
    }
    Ok(())
}

pub async fn record_failure(pool: &Pool, keys: &[(String, ThrottlePolicy)]) -> Result<(), PlatformError> {
    let now = now();
    let mut tx = crate::transitions::begin(pool).await?;
    for (key, policy) in keys {
        let row: Option<(i64, i64)> = sqlx::query_as("SELECT failures, window_start FROM login_failures WHERE key = ?")
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
        let before = row.map(|(f, w)| FailureRecord { failures: f as u32, window_start: w });
        let after = policy.after_failure(before, now);
        sqlx::query(
            "INSERT INTO login_failures (key, failures, window_start) VALUES (?, ?, ?)
             ON CONFLICT(key) DO UPDATE SET failures = excluded.failures, window_start = excluded.window_start",
        )
        .bind(key)
        .bind(after.failures as i64)
        .bind(after.window_start)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A successful login forgives the username's failures (not the address's:
/// one valid account must not unlock guessing at others).
pub async fn clear_user(pool: &Pool, username: &str) -> Result<(), PlatformError> {
    sqlx::query("DELETE FROM login_failures WHERE key = ?")
        .bind(format!("user:{}", username.to_lowercase()))
        .execute(pool)
        .await?;
    Ok(())
}
