//! Raw sample storage: batched inserts and the window reads that reclaim
//! and rebalancing decide on.

use super::GpuSample;
use crate::{db::Pool, PlatformError};
use sqlx::{QueryBuilder, Sqlite};

/// Rows per INSERT statement: one statement per row would spend most of the
/// time crossing to sqlx's connection thread; 400 rows × 10 values stays
/// well under SQLite's bound-variable limit.
const ROWS_PER_STATEMENT: usize = 400;

/// Stores `samples` in one transaction. A sample for a (GPU, time) already
/// stored replaces it, so a retried batch does not fail.
pub async fn insert_samples(pool: &Pool, samples: &[GpuSample]) -> Result<(), PlatformError> {
    if samples.is_empty() {
        return Ok(());
    }
    if let Some(bad) = samples.iter().find(|s| !valid(s)) {
        return Err(PlatformError::BadRequest(format!("invalid sample for GPU #{} at {}: {bad:?}", bad.gpu_id, bad.at_ms)));
    }
    let mut tx = pool.begin().await?;
    for chunk in samples.chunks(ROWS_PER_STATEMENT) {
        let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(
            "INSERT OR REPLACE INTO gpu_samples (gpu_id, at_ms, node_id, machine_id, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, throttled) ",
        );
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
    tx.commit().await?;
    Ok(())
}

/// Finite, in range: a sample that is not is a bug in its source, refused
/// before anything is written.
fn valid(s: &GpuSample) -> bool {
    let finite = [s.util_pct, s.temp_c, s.power_w].iter().all(|v| v.is_finite());
    finite && (0.0..=100.0).contains(&s.util_pct) && s.mem_used_mb >= 0 && s.mem_total_mb >= 0 && s.power_w >= 0.0 && s.at_ms >= 0
}

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
pub async fn gpu_window(pool: &Pool, gpu_ids: &[i64], from_ms: i64, to_ms: i64) -> Result<Vec<GpuSample>, PlatformError> {
    let mut out = Vec::new();
    let mut ids = gpu_ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    // One indexed range read per GPU: the primary key is (gpu_id, at_ms).
    for id in ids {
        let rows: Vec<SampleRow> = sqlx::query_as(
            "SELECT gpu_id, at_ms, node_id, machine_id, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, throttled \
             FROM gpu_samples WHERE gpu_id = ? AND at_ms BETWEEN ? AND ? ORDER BY at_ms",
        )
        .bind(id)
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(pool)
        .await?;
        out.extend(rows.into_iter().map(from_row));
    }
    Ok(out)
}
