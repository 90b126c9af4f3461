//! Rollups (1-minute and 1-hour mean and max per GPU and holder) and the
//! pruning that keeps storage bounded.
//!
//! Every statement on a table keyed by GPU first names the GPUs so SQLite
//! walks the (gpu_id, time) primary keys instead of scanning the whole
//! table for a time range; recent raw samples are keyed by time and read as
//! a range. The GPUs named are those the table holds rows of
//! ([`gpu_ids_of`]), not the rows of `gpus`: a GPU removed from its node
//! (a replaced card, a removed node) keeps its history, attributed, until
//! that history ages out like any other — naming only the present GPUs
//! kept it for ever.

use crate::{db::Pool, PlatformError};
use gantry_core::telemetry::{Retention, HOUR_MS, MINUTE_MS};
use sqlx::SqliteConnection;

/// Minutes whose end is at least this long ago are rolled up: later
/// samples of a closed minute (a slow batch) still make it in.
pub const ROLLUP_LAG_MS: i64 = 30_000;

/// `gpu_id IN (…)` for `table`: the distinct GPU ids of its primary key,
/// found by one index seek per GPU (SQLite's "loose index scan": the
/// smallest id, then the smallest above it, …), never a scan of its rows.
/// SQLite materialises the list before the outer statement runs, so a
/// DELETE may use it on its own table.
macro_rules! gpu_ids_of {
    ($table:literal) => {
        concat!(
            "(WITH RECURSIVE ids(id) AS (SELECT MIN(gpu_id) FROM ",
            $table,
            " UNION ALL SELECT (SELECT MIN(gpu_id) FROM ",
            $table,
            " WHERE gpu_id > ids.id) FROM ids WHERE ids.id IS NOT NULL) \
             SELECT id FROM ids WHERE id IS NOT NULL)"
        )
    };
}

const MINUTES_FROM_RAW: &str = concat!(
    "INSERT OR REPLACE INTO gpu_rollup_1m \
    (gpu_id, bucket_ms, machine_id, node_id, samples, minutes, util_mean, util_max, mem_mean, mem_max, mem_total, temp_mean, temp_max, power_mean, power_max) \
    SELECT gpu_id, (at_ms / 60000) * 60000 AS b, COALESCE(machine_id, 0) AS m, MAX(node_id), COUNT(*), 1, \
           AVG(util_pct), MAX(util_pct), AVG(mem_used_mb), MAX(mem_used_mb), MAX(mem_total_mb), AVG(temp_c), MAX(temp_c), AVG(power_w), MAX(power_w) \
    FROM (SELECT * FROM gpu_samples WHERE gpu_id IN ",
    gpu_ids_of!("gpu_samples"),
    " AND at_ms >= ?1 AND at_ms < ?2 \
          UNION ALL SELECT * FROM gpu_samples_recent WHERE at_ms >= ?1 AND at_ms < ?2) \
    GROUP BY gpu_id, b, m"
);

// Means weighted by sample count: an hour's mean is the mean of its raw
// samples, not of its minutes.
const HOURS_FROM_MINUTES: &str = concat!(
    "INSERT OR REPLACE INTO gpu_rollup_1h \
    (gpu_id, bucket_ms, machine_id, node_id, samples, minutes, util_mean, util_max, mem_mean, mem_max, mem_total, temp_mean, temp_max, power_mean, power_max) \
    SELECT gpu_id, (bucket_ms / 3600000) * 3600000 AS b, machine_id, MAX(node_id), SUM(samples), SUM(minutes), \
           SUM(util_mean * samples) / SUM(samples), MAX(util_max), SUM(mem_mean * samples) / SUM(samples), MAX(mem_max), MAX(mem_total), \
           SUM(temp_mean * samples) / SUM(samples), MAX(temp_max), SUM(power_mean * samples) / SUM(samples), MAX(power_max) \
    FROM gpu_rollup_1m WHERE gpu_id IN ",
    gpu_ids_of!("gpu_rollup_1m"),
    " AND bucket_ms >= ? AND bucket_ms < ? GROUP BY gpu_id, b, machine_id"
);

/// Rolls up the raw samples of `[from_ms, to_ms)` (whole minutes) into
/// minutes, and the hours those minutes touch (a partial hour is rewritten
/// as it fills). Returns the minute rows written.
pub async fn roll_up_range(pool: &Pool, from_ms: i64, to_ms: i64) -> Result<u64, PlatformError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    let rows = roll(&mut tx, from_ms, to_ms).await?;
    tx.commit().await?;
    Ok(rows)
}

async fn roll(conn: &mut SqliteConnection, from_ms: i64, to_ms: i64) -> Result<u64, PlatformError> {
    let (from, to) = (floor(from_ms, MINUTE_MS), floor(to_ms, MINUTE_MS));
    if to <= from {
        return Ok(0);
    }
    let rows = sqlx::query(MINUTES_FROM_RAW).bind(from).bind(to).execute(&mut *conn).await?.rows_affected();
    let hours_to = floor(to - 1, HOUR_MS) + HOUR_MS;
    sqlx::query(HOURS_FROM_MINUTES).bind(floor(from, HOUR_MS)).bind(hours_to).execute(&mut *conn).await?;
    Ok(rows)
}

/// Rolls up every minute closed since the last call (at most `raw_keep_ms`
/// back on the first call) and records how far it got, in one IMMEDIATE
/// transaction: a batch of samples committed beside it is either read here
/// or sees the new mark and rolls itself in ([`roll_in_late`]).
pub async fn roll_up(pool: &Pool, now_ms: i64, raw_keep_ms: i64) -> Result<u64, PlatformError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    let rolled: i64 =
        sqlx::query_scalar("SELECT rolled_to_ms FROM telemetry_state WHERE id = 1").fetch_one(&mut *tx).await?;
    let from = if rolled == 0 { floor(now_ms - raw_keep_ms, MINUTE_MS) } else { rolled };
    let to = floor(now_ms - ROLLUP_LAG_MS, MINUTE_MS);
    if to <= from {
        return Ok(0);
    }
    let rows = roll(&mut tx, from, to).await?;
    sqlx::query("UPDATE telemetry_state SET rolled_to_ms = ? WHERE id = 1").bind(to).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(rows)
}

/// Samples written in `tx` as old as `oldest_ms`, into minutes already
/// rolled up (a batch committed more than [`ROLLUP_LAG_MS`] late, e.g.
/// behind a slow disk): those minutes and their hours are rolled again, so
/// the charts and GPU-hours count them and pruning (which keeps only what
/// is not yet rolled) cannot drop them unrolled.
pub(super) async fn roll_in_late(tx: &mut SqliteConnection, oldest_ms: i64) -> Result<u64, PlatformError> {
    let rolled: i64 =
        sqlx::query_scalar("SELECT rolled_to_ms FROM telemetry_state WHERE id = 1").fetch_one(&mut *tx).await?;
    if oldest_ms >= rolled {
        return Ok(0);
    }
    roll(tx, oldest_ms, rolled).await
}

/// What a prune removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub raw: u64,
    pub minutes: u64,
    pub hours: u64,
}

/// Deletes what is older than its retention, of every GPU the tables hold
/// — removed GPUs' included. Raw samples not yet rolled up are kept
/// whatever their age, so pruning never loses history; recent samples are
/// pruned once moved (they are younger than any retention).
pub async fn prune(pool: &Pool, now_ms: i64, keep: Retention) -> Result<Pruned, PlatformError> {
    const RAW: &str = concat!("DELETE FROM gpu_samples WHERE gpu_id IN ", gpu_ids_of!("gpu_samples"), " AND at_ms < ?");
    const MINUTES: &str =
        concat!("DELETE FROM gpu_rollup_1m WHERE gpu_id IN ", gpu_ids_of!("gpu_rollup_1m"), " AND bucket_ms < ?");
    const HOURS: &str =
        concat!("DELETE FROM gpu_rollup_1h WHERE gpu_id IN ", gpu_ids_of!("gpu_rollup_1h"), " AND bucket_ms < ?");
    let rolled: i64 =
        sqlx::query_scalar("SELECT rolled_to_ms FROM telemetry_state WHERE id = 1").fetch_one(pool).await?;
    let raw_cut = (now_ms - keep.raw_ms).min(rolled);
    let delete = |sql: &'static str, cut: i64| async move {
        Ok::<u64, PlatformError>(sqlx::query(sql).bind(cut).execute(pool).await?.rows_affected())
    };
    Ok(Pruned {
        raw: delete(RAW, raw_cut).await?,
        minutes: delete(MINUTES, now_ms - keep.minute_ms).await?,
        hours: delete(HOURS, now_ms - keep.hour_ms).await?,
    })
}

fn floor(ms: i64, unit: i64) -> i64 {
    ms.div_euclid(unit) * unit
}
