//! Raw sample storage: batched inserts and the window reads that reclaim
//! and rebalancing decide on.

use super::GpuSample;
use crate::{db::Pool, PlatformError};
use gantry_core::telemetry::MINUTE_MS;
use sqlx::{QueryBuilder, Sqlite};

/// Rows per INSERT statement: one statement per row would spend most of the
/// time crossing to sqlx's connection thread; 400 rows × 10 values stays
/// well under SQLite's bound-variable limit.
const ROWS_PER_STATEMENT: usize = 400;

/// Recent samples are moved into `gpu_samples` in ten-minute slices: the
/// longer the slice, the more samples of one GPU land on its pages at once
/// (the move is what costs), but the more rows a reader of recent samples
/// scans (at 1,000 GPUs: 30 minutes gave 191,000 samples/s ingested and a
/// 22 ms one-hour node chart).
pub const SETTLE_SPAN_MS: i64 = 10 * MINUTE_MS;

/// A slice is moved once it ended this long ago: samples of a slow pass
/// still go to the recent table (a later one would go to `gpu_samples`).
pub const SETTLE_LAG_MS: i64 = 2 * MINUTE_MS;

/// Stores `samples` in one transaction. A sample for a (GPU, time) already
/// stored replaces it, so a retried batch does not fail. Samples go to
/// `gpu_samples_recent` unless their time was already moved (migration 0012).
pub async fn insert_samples(pool: &Pool, samples: &[GpuSample]) -> Result<(), PlatformError> {
    if samples.is_empty() {
        return Ok(());
    }
    if let Some(bad) = samples.iter().find(|s| !valid(s)) {
        return Err(PlatformError::BadRequest(format!(
            "invalid sample for GPU #{} at {}: {bad:?}",
            bad.gpu_id, bad.at_ms
        )));
    }
    // IMMEDIATE: the horizon read below must still hold when we write.
    let mut tx = crate::db::begin_immediate(pool).await?;
    let moved_to: i64 =
        sqlx::query_scalar("SELECT moved_to_ms FROM telemetry_state WHERE id = 1").fetch_one(&mut *tx).await?;
    let (late, recent): (Vec<&GpuSample>, Vec<&GpuSample>) = samples.iter().partition(|s| s.at_ms < moved_to);
    for (table, rows) in [("gpu_samples", late), ("gpu_samples_recent", recent)] {
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
                "INSERT OR REPLACE INTO {table} (gpu_id, at_ms, node_id, machine_id, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, throttled) "
            ));
            q.push_values(chunk, |mut row, s| {
                row.push_bind(s.gpu_id)
                    .push_bind(s.at_ms)
                    .push_bind(s.node_id)
                    .push_bind(s.machine_id)
                    .push_bind(s.util_pct)
                    .push_bind(s.mem_used_mb)
                    .push_bind(s.mem_total_mb)
                    .push_bind(s.temp_c)
                    .push_bind(s.power_w)
                    .push_bind(s.throttled);
            });
            q.build().persistent(true).execute(&mut *tx).await?;
        }
    }
    let oldest = samples.iter().map(|s| s.at_ms).min().unwrap_or(i64::MAX);
    super::rollup::roll_in_late(&mut tx, oldest).await?;
    tx.commit().await?;
    Ok(())
}

/// Where the recent table should end at `now_ms`: the end of the last
/// slice that ended at least `SETTLE_LAG_MS` ago.
pub fn settle_before(now_ms: i64) -> i64 {
    (now_ms - SETTLE_LAG_MS).div_euclid(SETTLE_SPAN_MS) * SETTLE_SPAN_MS
}

/// Moves the recent samples before `before_ms` into `gpu_samples`, sorted
/// by GPU, in one transaction (readers see them in one table or the
/// other, never both, never neither). Returns the samples moved; nothing
/// to do when the horizon is already there.
pub async fn move_settled(pool: &Pool, before_ms: i64) -> Result<u64, PlatformError> {
    const HORIZON: &str = "SELECT moved_to_ms FROM telemetry_state WHERE id = 1";
    // Called after every pass: most calls end here, without the write lock.
    if before_ms <= sqlx::query_scalar::<_, i64>(HORIZON).fetch_one(pool).await? {
        return Ok(0);
    }
    let mut tx = crate::db::begin_immediate(pool).await?;
    let moved_to: i64 = sqlx::query_scalar(HORIZON).fetch_one(&mut *tx).await?;
    if before_ms <= moved_to {
        tx.rollback().await?;
        return Ok(0);
    }
    let moved = sqlx::query(
        "INSERT OR REPLACE INTO gpu_samples (gpu_id, at_ms, node_id, machine_id, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, throttled) \
         SELECT gpu_id, at_ms, node_id, machine_id, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, throttled \
         FROM gpu_samples_recent WHERE at_ms < ? ORDER BY gpu_id, at_ms",
    )
    .bind(before_ms)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query("DELETE FROM gpu_samples_recent WHERE at_ms < ?").bind(before_ms).execute(&mut *tx).await?;
    sqlx::query("UPDATE telemetry_state SET moved_to_ms = ? WHERE id = 1").bind(before_ms).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(moved)
}

/// Finite, in range: a sample that is not is a bug in its source, refused
/// before anything is written.
fn valid(s: &GpuSample) -> bool {
    let finite = [s.util_pct, s.temp_c, s.power_w].iter().all(|v| v.is_finite());
    finite
        && (0.0..=100.0).contains(&s.util_pct)
        && s.mem_used_mb >= 0
        && s.mem_total_mb >= 0
        && s.power_w >= 0.0
        && s.at_ms >= 0
}

const COLUMNS: &str =
    "gpu_id, at_ms, node_id, machine_id, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, throttled";

type SampleRow = (i64, i64, i64, Option<i64>, f64, i64, i64, f64, f64, bool);

fn from_row(r: SampleRow) -> GpuSample {
    GpuSample {
        gpu_id: r.0,
        at_ms: r.1,
        node_id: r.2,
        machine_id: r.3,
        util_pct: r.4,
        mem_used_mb: r.5,
        mem_total_mb: r.6,
        temp_c: r.7,
        power_w: r.8,
        throttled: r.9,
    }
}

/// Raw samples of `gpu_ids` with `from_ms <= at_ms <= to_ms`, ordered by GPU
/// then time. Only as far back as the raw retention keeps them.
pub async fn gpu_window(
    pool: &Pool,
    gpu_ids: &[i64],
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<GpuSample>, PlatformError> {
    let mut ids = gpu_ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut out: Vec<GpuSample> = Vec::new();
    // Both reads in one read transaction: one snapshot of the database, so
    // samples the settling moves between the two tables meanwhile are seen
    // once — not in neither (a gap in the chart) nor in both.
    let mut tx = pool.begin().await?;
    // One indexed range read per GPU of the settled samples (key: GPU, time)...
    for &id in &ids {
        let rows: Vec<SampleRow> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM gpu_samples WHERE gpu_id = ? AND at_ms BETWEEN ? AND ? ORDER BY at_ms"
        ))
        .bind(id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(&mut *tx)
        .await?;
        out.extend(rows.into_iter().map(from_row));
    }
    // ...and one scan of the recent ones (key: time, GPU) for all of them;
    // they are newer than any settled sample of the same GPU.
    let recent: Vec<SampleRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM gpu_samples_recent WHERE at_ms BETWEEN ? AND ? AND gpu_id IN (SELECT value FROM json_each(?))"
    ))
    .bind(from_ms)
    .bind(to_ms)
    .bind(serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into()))
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    out.extend(recent.into_iter().map(from_row));
    // Stable: settled before recent within a GPU, both already in time order.
    out.sort_by_key(|s| s.gpu_id);
    Ok(out)
}
