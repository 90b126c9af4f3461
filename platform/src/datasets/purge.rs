//! A deleted version's files, removed after its row. The removal is
//! recorded (`dataset_purges`) in the transaction that deletes the row and
//! forgotten only once both stores are clean: a request that hangs up, a
//! store that fails or a process that stops halfway leaves the record, and
//! the start-up clean and the periodic sweep ([`super::sweep()`]) finish it.
//! Until then a new version of the same name is refused — it would live
//! under the same prefix, so its files would be mixed with the old ones
//! and deleted by their removal.
//!
//! One runner at a time holds a purge, under a lease like an upload's
//! writer's ([`super::writing`]): a second runner still deleting after the
//! first one finished (and a new version took the name) would delete the
//! new version's files.

use super::{error, store, DatasetError, Datasets};
use crate::{db::Pool, now};
use sqlx::SqliteConnection;
use std::time::Duration;

const LEASE_SECS: i64 = super::writing::LEASE_SECS;
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// Records that `prefix` (and the unfinished uploads' `temps`) must go
/// from the central store and `region`'s. Call it in the transaction that
/// deletes the version's row.
pub(super) async fn record(
    db: &mut SqliteConnection,
    dataset_id: i64,
    version: &str,
    prefix: &str,
    region: &str,
    temps: &[String],
) -> Result<i64, DatasetError> {
    let temps = serde_json::to_string(temps)
        .map_err(|e| DatasetError::Platform(crate::PlatformError::Internal(e.to_string())))?;
    Ok(sqlx::query_scalar(
        "INSERT INTO dataset_purges (dataset_id, version_name, prefix, region_code, temp_keys, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(dataset_id)
    .bind(version)
    .bind(prefix)
    .bind(region)
    .bind(temps)
    .bind(now())
    .fetch_one(&mut *db)
    .await?)
}

/// Refuses a new version whose files would share a prefix still being removed.
pub(super) async fn refuse_while_pending(
    db: &mut SqliteConnection,
    code: &str,
    name: &str,
) -> Result<(), DatasetError> {
    let pending: Option<i64> = sqlx::query_scalar("SELECT id FROM dataset_purges WHERE prefix = ? LIMIT 1")
        .bind(gantry_core::datasets::version_prefix(code, name))
        .fetch_optional(db)
        .await?;
    match pending {
        None => Ok(()),
        Some(_) => Err(DatasetError::Conflict(format!(
            "the files of the earlier version {name} of dataset {code} are still being removed; try again shortly"
        ))),
    }
}

/// Runs purge `id` on a task of its own, so that a request dropped
/// meanwhile does not stop it halfway, and waits for it. True when this
/// call removed the files; false when another runner holds the purge (it
/// finishes it) or it is done already.
pub(super) async fn run_detached(pool: &Pool, stores: &Datasets, id: i64) -> Result<bool, DatasetError> {
    let (pool, stores) = (pool.clone(), stores.clone());
    match tokio::spawn(async move { run(&pool, &stores, id).await }).await {
        Ok(done) => done,
        Err(e) => Err(DatasetError::store(
            "removing a deleted version's files failed on the server; they are removed later",
            format!("purge task: {e}"),
        )),
    }
}

/// Retries every purge no live runner holds at `at`; the number finished.
/// A purge that fails again is logged and left for the next try. (Taking
/// one is checked against the clock: a runner's lease is real time.)
pub(super) async fn retry_pending(pool: &Pool, stores: &Datasets, at: i64) -> Result<usize, DatasetError> {
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM dataset_purges WHERE runner IS NULL OR runner_expires <= ? ORDER BY id")
            .bind(at)
            .fetch_all(pool)
            .await?;
    let mut done = 0;
    for id in ids {
        match run_detached(pool, stores, id).await {
            Ok(true) => done += 1,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, purge = id, "a deleted version's files are still not all removed; tried again later")
            }
        }
    }
    if done > 0 {
        tracing::info!(purges = done, "removed the files of deleted dataset versions");
    }
    Ok(done)
}

async fn run(pool: &Pool, stores: &Datasets, id: i64) -> Result<bool, DatasetError> {
    let owner = store::hex(&rand::random::<[u8; 12]>());
    let at = now();
    let taken = sqlx::query("UPDATE dataset_purges SET runner = ?, runner_expires = ? WHERE id = ? AND (runner IS NULL OR runner_expires <= ?)")
        .bind(&owner)
        .bind(at + LEASE_SECS)
        .bind(id)
        .bind(at)
        .execute(pool)
        .await?;
    if taken.rows_affected() == 0 {
        return Ok(false);
    }
    // Removing stops at once if the lease is lost (a stall past it): the
    // runner that took over may have finished, and a new version of the
    // name may hold files under the prefix by now.
    let result = tokio::select! {
        result = remove_files(pool, stores, id) => result,
        () = renew(pool, id, &owner) => {
            tracing::warn!(purge = id, "a purge's lease was lost; another runner finishes it");
            return Ok(false);
        }
    };
    // Forgotten only when clean; otherwise let go at once, for the next try.
    let end = match result {
        Ok(()) => sqlx::query("DELETE FROM dataset_purges WHERE id = ? AND runner = ?"),
        Err(_) => {
            sqlx::query("UPDATE dataset_purges SET runner = NULL, runner_expires = 0 WHERE id = ? AND runner = ?")
        }
    };
    end.bind(id).bind(&owner).execute(pool).await?;
    result.map(|()| true)
}

/// Both stores, the prefix and then the temporary objects; every store is
/// tried, and the error names those that failed.
async fn remove_files(pool: &Pool, stores: &Datasets, id: i64) -> Result<(), DatasetError> {
    let (version, prefix, region, temps): (String, String, String, String) =
        sqlx::query_as("SELECT version_name, prefix, region_code, temp_keys FROM dataset_purges WHERE id = ?")
            .bind(id)
            .fetch_one(pool)
            .await?;
    let temps: Vec<String> = serde_json::from_str(&temps).unwrap_or_default();
    let (mut failed, mut details) = (Vec::new(), Vec::new());
    for (role, s) in [(error::CENTRAL, stores.central()), (error::REGION, stores.region_store(&region))] {
        let s = match s {
            Ok(s) => s,
            Err(e) => {
                failed.push(role);
                details.push(e.to_string());
                continue;
            }
        };
        let mut result = s.delete_prefix(&prefix).await;
        for temp in &temps {
            for key in [temp.clone(), format!("{temp}.next"), format!("{temp}.old")] {
                if result.is_ok() {
                    result = s.delete(&store::temp_key(&key)).await;
                }
            }
        }
        if let Err(e) = result {
            failed.push(role);
            details.push(format!("{}: {e}", s.describe()));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        let public = format!(
            "version {version} was deleted, but removing its files failed in {}; the server tries again later",
            failed.join(" and ")
        );
        Err(DatasetError::store(public, details.join("; ")))
    }
}

/// Renews the purge's lease; returns when it is no longer this runner's.
async fn renew(pool: &Pool, id: i64, owner: &str) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let renewed = sqlx::query("UPDATE dataset_purges SET runner_expires = ? WHERE id = ? AND runner = ?")
            .bind(now() + LEASE_SECS)
            .bind(id)
            .bind(owner)
            .execute(pool)
            .await;
        match renewed {
            Ok(r) if r.rows_affected() == 0 => return,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, purge = id, "could not renew a purge's lease; retrying"),
        }
    }
}
