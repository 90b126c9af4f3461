//! Failed-login bookkeeping in the database, so the limit holds across
//! restarts and server replicas. The policy itself is `gantry_core::throttle`.
//!
//! An attempt is counted before its password is checked, for every key at
//! once, in one `BEGIN IMMEDIATE` transaction: writers queue on SQLite's
//! write lock instead of racing a stale snapshot, so no count is lost and
//! parallel guesses each see the ones before them.

use crate::{db::Pool, now, PlatformError};
use gantry_core::throttle::{FailureRecord, ThrottlePolicy, Verdict};

/// The keys one login attempt counts against, each with its policy: the
/// account as seen from this client, and the client across all accounts
/// (an IPv6 client as its /64: `gantry_core::throttle::counted_address`).
pub fn keys(username: &str, address: Option<&str>) -> Vec<(String, ThrottlePolicy)> {
    let user = username.to_lowercase();
    let address = address.map(gantry_core::throttle::counted_address);
    let addr = address.as_deref().unwrap_or("unknown");
    let mut keys = vec![(format!("user:{user}|addr:{addr}"), ThrottlePolicy::PER_ACCOUNT_CLIENT)];
    if let Some(addr) = &address {
        keys.push((format!("addr:{addr}"), ThrottlePolicy::PER_ADDRESS));
    }
    keys
}

/// What counting an attempt decided: the records as written (to give back
/// on success) and whether the attempt may verify its password.
pub struct Counted {
    records: Vec<(String, FailureRecord)>,
}

/// Counts one attempt against every key and refuses with `Throttled` when
/// it is beyond any key's allowance.
pub async fn count_attempt(pool: &Pool, keys: &[(String, ThrottlePolicy)]) -> Result<Counted, PlatformError> {
    let now = now();
    // A key already locked refuses the attempt whatever is counted: said
    // without a write, so a locked client sending random names neither
    // grows the table nor holds SQLite's write lock (a stale read can only
    // miss a lock, which the counting below then finds).
    for (key, policy) in keys {
        if let Verdict::Locked { retry_after_secs } = policy.verdict(record(pool, key).await?, now) {
            return Err(PlatformError::Throttled { retry_after_secs, busy: false });
        }
    }
    let mut tx = crate::transitions::begin(pool).await?;
    let mut records = Vec::with_capacity(keys.len());
    let mut refusal = None;
    for (key, policy) in keys {
        let before = record(&mut *tx, key).await?;
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
        if let Verdict::Locked { retry_after_secs } = policy.admits(after, now) {
            refusal = Some(refusal.map_or(retry_after_secs, |r: i64| r.max(retry_after_secs)));
        }
        records.push((key.clone(), after));
    }
    tx.commit().await?;
    match refusal {
        Some(retry_after_secs) => Err(PlatformError::Throttled { retry_after_secs, busy: false }),
        None => Ok(Counted { records }),
    }
}

/// Whether any key is locked now (how long until it opens), without
/// counting anything: for callers that count only failures (the SSH
/// gateway counts refused keys, and refuses a locked client at once).
pub async fn locked(pool: &Pool, keys: &[(String, ThrottlePolicy)]) -> Result<Option<i64>, PlatformError> {
    let now = now();
    for (key, policy) in keys {
        if let Verdict::Locked { retry_after_secs } = policy.verdict(record(pool, key).await?, now) {
            return Ok(Some(retry_after_secs));
        }
    }
    Ok(None)
}

async fn record<'c, E: sqlx::SqliteExecutor<'c>>(conn: E, key: &str) -> Result<Option<FailureRecord>, PlatformError> {
    let row: Option<(i64, i64)> = sqlx::query_as("SELECT failures, window_start FROM login_failures WHERE key = ?")
        .bind(key)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(|(f, w)| FailureRecord { failures: f.clamp(0, u32::MAX as i64) as u32, window_start: w }))
}

/// Forgets the counts whose window ended before `now` (the longest policy's
/// window): a row past its window means what no row means, and rows of
/// guessed names would otherwise pile up for ever.
pub async fn prune(pool: &Pool, now: i64) -> Result<u64, PlatformError> {
    let longest = ThrottlePolicy::PER_ACCOUNT_CLIENT.window_secs.max(ThrottlePolicy::PER_ADDRESS.window_secs);
    Ok(sqlx::query("DELETE FROM login_failures WHERE window_start <= ?")
        .bind(now - longest)
        .execute(pool)
        .await?
        .rows_affected())
}

/// [`prune`] every `every`, for as long as the process runs.
pub async fn prune_loop(pool: Pool, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let p = pool.clone();
        if let Some(Err(e)) =
            crate::contained::pass("sign-in throttle prune", async move { prune(&p, now()).await }).await
        {
            tracing::warn!(error = %e, "could not prune the sign-in throttle's old counts");
        }
    }
}

/// A correct password: the account's count for this client is forgiven,
/// and the client's count gets this attempt back (a successful sign-in is
/// not a failure; but one valid account must not unlock guessing at others,
/// so earlier failures stay).
pub async fn forgive(pool: &Pool, counted: &Counted) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    for (key, rec) in &counted.records {
        if key.starts_with("user:") {
            sqlx::query("DELETE FROM login_failures WHERE key = ?").bind(key).execute(&mut *tx).await?;
        } else {
            take_back(&mut tx, key, rec).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// An attempt whose password was never verified (the argon2 gate was
/// full): it told its sender nothing, so it is not a guess — every key gets
/// it back. Otherwise a flood of anonymous sign-ins would make the real
/// owner's refused attempts count, and lock them out.
pub async fn give_back(pool: &Pool, counted: &Counted) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    for (key, rec) in &counted.records {
        take_back(&mut tx, key, rec).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// One attempt off a key's count, if its window is still the one counted in.
async fn take_back(tx: &mut crate::transitions::Tx, key: &str, rec: &FailureRecord) -> Result<(), PlatformError> {
    sqlx::query("UPDATE login_failures SET failures = MAX(failures - 1, 0) WHERE key = ? AND window_start = ?")
        .bind(key)
        .bind(rec.window_start)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Forgets every count of one account (an admin reset its password).
pub async fn clear_user(conn: &mut sqlx::SqliteConnection, username: &str) -> Result<(), PlatformError> {
    sqlx::query("DELETE FROM login_failures WHERE key LIKE ? ESCAPE '\\'")
        .bind(format!(
            "user:{}|%",
            username.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
        ))
        .execute(&mut *conn)
        .await?;
    Ok(())
}
