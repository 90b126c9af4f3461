//! The reads behind the charts: a machine's or a node's GPUs over a range,
//! each from the coarsest stored resolution that serves it.

use super::service::config;
use crate::{db::Pool, PlatformError};
use gantry_core::telemetry::{
    choose_resolution, point_step_ms,
    view::{ChartData, ChartEvent, ChartPoint, GpuSeries},
    ChartRange, Resolution, DEFAULT_HOT_PCT, DEFAULT_RECLAIM_PCT,
};
use std::collections::HashMap;

/// Whose GPUs a chart shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The samples attributed to this machine, on whichever GPUs it held.
    Machine(i64),
    /// Every GPU of this node, whoever held it.
    Node(i64),
}

/// The chart of `scope` over `range` ending at `now_ms`.
pub async fn chart(pool: &Pool, scope: Scope, range: ChartRange, now_ms: i64) -> Result<ChartData, PlatformError> {
    let cfg = config();
    let interval_ms = cfg.interval.as_millis() as i64;
    let (from, to) = (now_ms - range.span_ms(), now_ms);
    let resolution = choose_resolution(from, to, now_ms, interval_ms, cfg.keep);
    let step = point_step_ms(to - from, resolution.step_ms(interval_ms));
    let gpus = gpus_of(pool, scope).await?;
    let machine = match scope {
        Scope::Machine(id) => id,
        Scope::Node(_) => 0,
    };
    let mut raw = match resolution {
        Resolution::Raw => {
            raw_points(pool, &gpus.iter().map(|g| g.0).collect::<Vec<_>>(), machine, from, to, step).await?
        }
        _ => HashMap::new(),
    };
    let mut series = Vec::with_capacity(gpus.len());
    let mut simulated = false;
    for (gpu_id, label, sim) in gpus {
        simulated |= sim;
        let (points, mem_total_mb) = match resolution {
            Resolution::Raw => raw.remove(&gpu_id).unwrap_or_default(),
            res => rolled_points(pool, res, machine, gpu_id, from, to, step).await?,
        };
        series.push(GpuSeries { gpu_id, label, mem_total_mb, points });
    }
    let (reclaim_pct, hot_pct) = thresholds(pool).await?;
    let events = match scope {
        Scope::Machine(id) => events(pool, id, from, to).await?,
        Scope::Node(_) => Vec::new(),
    };
    Ok(ChartData {
        range: range.as_str().into(),
        resolution,
        from_ms: from,
        to_ms: to,
        step_ms: step,
        reclaim_pct,
        hot_pct,
        series,
        events,
        simulated,
    })
}

/// (gpu, label, simulated): a machine's GPUs now and those its history
/// was sampled on; a node's GPUs. One query, labels included.
async fn gpus_of(pool: &Pool, scope: Scope) -> Result<Vec<(i64, String, bool)>, PlatformError> {
    type Row = (i64, Option<String>, Option<i64>, Option<String>, Option<bool>);
    let rows: Vec<Row> = match scope {
        Scope::Machine(id) => {
            sqlx::query_as(
                "WITH ids(gpu_id) AS (SELECT gpu_id FROM machine_gpus WHERE machine_id = ?1 \
                     UNION SELECT gpu_id FROM gpu_rollup_1h WHERE machine_id = ?1 UNION SELECT gpu_id FROM gpu_rollup_1m WHERE machine_id = ?1) \
                 SELECT ids.gpu_id, n.name, g.idx, g.model, g.simulated FROM ids \
                 LEFT JOIN gpus g ON g.id = ids.gpu_id LEFT JOIN nodes n ON n.id = g.node_id ORDER BY ids.gpu_id",
            )
            .bind(id)
            .fetch_all(pool)
            .await?
        }
        Scope::Node(id) => {
            sqlx::query_as("SELECT g.id, n.name, g.idx, g.model, g.simulated FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE g.node_id = ? ORDER BY g.idx")
                .bind(id)
                .fetch_all(pool)
                .await?
        }
    };
    Ok(rows
        .into_iter()
        .map(|row| match row {
            (id, Some(node), Some(idx), Some(model), sim) => {
                (id, format!("{node} GPU {idx} ({model})"), sim.unwrap_or(false))
            }
            // The GPU's node was removed since: its history still shows.
            (id, ..) => (id, format!("GPU #{id} (removed)"), false),
        })
        .collect())
}

/// Points and memory size of each GPU from the raw samples, settled and
/// recent, in one read: the recent table is keyed by time, so one scan
/// serves every GPU of the chart.
async fn raw_points(
    pool: &Pool,
    gpu_ids: &[i64],
    machine: i64,
    from: i64,
    to: i64,
    step: i64,
) -> Result<HashMap<i64, (Vec<ChartPoint>, i64)>, PlatformError> {
    let ids = serde_json::to_string(gpu_ids).unwrap_or_else(|_| "[]".into());
    let rows: Vec<(i64, i64, f64, f64, f64, i64)> = sqlx::query_as(
        "SELECT gpu_id, (at_ms / ?1) * ?1 AS b, AVG(util_pct), MAX(util_pct), AVG(mem_used_mb), MAX(mem_total_mb) FROM ( \
           SELECT gpu_id, at_ms, machine_id, util_pct, mem_used_mb, mem_total_mb FROM gpu_samples \
             WHERE gpu_id IN (SELECT value FROM json_each(?2)) AND at_ms BETWEEN ?3 AND ?4 \
           UNION ALL SELECT gpu_id, at_ms, machine_id, util_pct, mem_used_mb, mem_total_mb FROM gpu_samples_recent \
             WHERE at_ms BETWEEN ?3 AND ?4 AND gpu_id IN (SELECT value FROM json_each(?2))) \
         WHERE ?5 = 0 OR machine_id = ?5 GROUP BY gpu_id, b ORDER BY gpu_id, b",
    )
    .bind(step)
    .bind(ids)
    .bind(from)
    .bind(to)
    .bind(machine)
    .fetch_all(pool)
    .await?;
    let mut out: HashMap<i64, (Vec<ChartPoint>, i64)> = HashMap::new();
    for (gpu_id, at_ms, util, util_max, mem_mb, mem_total) in rows {
        let entry = out.entry(gpu_id).or_default();
        entry.0.push(ChartPoint { at_ms, util, util_max, mem_mb });
        entry.1 = entry.1.max(mem_total);
    }
    Ok(out)
}

/// A GPU's points from a rollup, averaged over `step` wide spans (means
/// weighted by the samples behind them), and its memory size.
async fn rolled_points(
    pool: &Pool,
    res: Resolution,
    machine: i64,
    gpu_id: i64,
    from: i64,
    to: i64,
    step: i64,
) -> Result<(Vec<ChartPoint>, i64), PlatformError> {
    let table = if res == Resolution::Minute { "gpu_rollup_1m" } else { "gpu_rollup_1h" };
    let sql = format!(
        "SELECT (bucket_ms / ?1) * ?1 AS b, SUM(util_mean * samples) / SUM(samples), MAX(util_max), SUM(mem_mean * samples) / SUM(samples), MAX(mem_total) \
         FROM {table} WHERE gpu_id = ?2 AND bucket_ms BETWEEN ?3 AND ?4 AND (?5 = 0 OR machine_id = ?5) GROUP BY b ORDER BY b"
    );
    let rows: Vec<(i64, f64, f64, f64, i64)> =
        sqlx::query_as(&sql).bind(step).bind(gpu_id).bind(from).bind(to).bind(machine).fetch_all(pool).await?;
    let mem_total = rows.iter().map(|r| r.4).max().unwrap_or(0);
    Ok((
        rows.into_iter()
            .map(|(at_ms, util, util_max, mem_mb, _)| ChartPoint { at_ms, util, util_max, mem_mb })
            .collect(),
        mem_total,
    ))
}

/// (reclaim threshold, hot threshold) in percent utilisation: the admin's
/// reclaim settings where they exist, else the defaults.
pub async fn thresholds(pool: &Pool) -> Result<(f64, f64), PlatformError> {
    let row: Option<(f64, f64)> =
        sqlx::query_as("SELECT threshold_pct, hot_util_pct FROM reclaim_settings WHERE id = 1")
            .fetch_optional(pool)
            .await?;
    Ok(row.unwrap_or((DEFAULT_RECLAIM_PCT, DEFAULT_HOT_PCT)))
}

/// The machine's reclaim/rebalance events within the range.
async fn events(pool: &Pool, machine_id: i64, from: i64, to: i64) -> Result<Vec<ChartEvent>, PlatformError> {
    let rows: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT at_ms, kind, detail FROM machine_events WHERE machine_id = ? AND at_ms BETWEEN ? AND ? ORDER BY at_ms",
    )
    .bind(machine_id)
    .bind(from)
    .bind(to)
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|(at_ms, kind, detail)| Ok(ChartEvent { at_ms, kind: kind.parse()?, detail })).collect()
}
