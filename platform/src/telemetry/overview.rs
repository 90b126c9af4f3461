//! The admin cluster overview: every GPU's latest reading with who holds
//! it, and per group GPU-hours held vs used over a period.

use crate::{db::Pool, PlatformError};
use gantry_core::telemetry::{
    view::{GroupUsage, HeatCell},
    HOUR_MS,
};

type CellRow = (
    i64,
    i64,
    String,
    i64,
    String,
    bool,
    Option<f64>,
    Option<f64>,
    Option<i64>,
    Option<i64>,
    Option<f64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// A reading older than this is not current: the sampler writes one every
/// interval, so a GPU whose latest is this old has gone silent (its NVML,
/// its node's sampler, a node down but not yet marked lost).
pub fn stale_after_ms(config: &super::TelemetryConfig) -> i64 {
    (3 * config.interval.as_millis() as i64).max(60_000)
}

/// Every GPU of every node, by node name and index, at `now_ms`.
///
/// A GPU without a current reading — on a lost node (the sampler skips
/// those, so their `gpu_latest` row is the last reading before the loss),
/// or whose latest reading is older than [`stale_after_ms`] — is listed
/// with no reading (util, temperature and time all None, drawn as "no
/// data"): showing it would pass a dead card off as busy or idle. So is
/// one whose latest reading was taken for another holder than today's (the
/// card changed hands since): it would put one group's load under
/// another's name, here and in `/metrics`.
/// `/metrics` builds on these cells and so omits those GPUs' gauges.
pub async fn heatmap(pool: &Pool, now_ms: i64) -> Result<Vec<HeatCell>, PlatformError> {
    let rows: Vec<CellRow> = sqlx::query_as(
        "SELECT g.id, g.node_id, n.name, g.idx, g.model, g.simulated, l.util_pct, l.temp_c, l.mem_used_mb, l.mem_total_mb, l.power_w, l.at_ms, m.id, m.name, u.username, gr.name \
         FROM gpus g JOIN nodes n ON n.id = g.node_id \
         LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id LEFT JOIN machines m ON m.id = mg.machine_id \
         LEFT JOIN gpu_latest l ON l.gpu_id = g.id AND n.state <> 'lost' AND l.at_ms > ? AND l.machine_id IS mg.machine_id \
         LEFT JOIN users u ON u.id = m.owner_id LEFT JOIN groups gr ON gr.id = m.group_id \
         ORDER BY n.name, g.idx",
    )
    .bind(now_ms - stale_after_ms(&super::config()))
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| HeatCell {
            gpu_id: r.0,
            node_id: r.1,
            node: r.2,
            idx: r.3,
            model: r.4,
            simulated: r.5,
            util: r.6,
            temp_c: r.7,
            mem_used_mb: r.8,
            mem_total_mb: r.9,
            power_w: r.10,
            at_ms: r.11,
            machine_id: r.12,
            machine: r.13,
            owner: r.14,
            group: r.15,
        })
        .collect())
}

/// The mean current utilisation of each of `machine_ids`' GPUs, from
/// readings fresher than [`stale_after_ms`] and taken for that machine (as
/// the heatmap reads them): (machine id, percent). A machine with no such
/// reading (no GPU, not sampled yet, a silent node) is left out. One query,
/// for the portal's dashboard.
pub async fn machines_util_now(
    pool: &Pool,
    machine_ids: &[i64],
    now_ms: i64,
) -> Result<Vec<(i64, f64)>, PlatformError> {
    if machine_ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = machine_ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    Ok(sqlx::query_as(&format!(
        "SELECT mg.machine_id, AVG(l.util_pct) FROM machine_gpus mg \
         JOIN gpu_latest l ON l.gpu_id = mg.gpu_id AND l.machine_id = mg.machine_id \
         WHERE mg.machine_id IN ({ids}) AND l.at_ms > ? GROUP BY mg.machine_id"
    ))
    .bind(now_ms - stale_after_ms(&super::config()))
    .fetch_all(pool)
    .await?)
}

/// GPU-hours per group over the hours that start in `[now - period, now)`:
/// held counts every minute a group's machine held a GPU, used weighs
/// those minutes by the GPU's mean utilisation. Read from the hourly
/// rollups, so the current (partial) hour counts as far as it is rolled up;
/// the hour `now - period` falls in does not (it began before the period:
/// counting it made "24 h" up to 25).
pub async fn held_vs_used(pool: &Pool, period_ms: i64, now_ms: i64) -> Result<Vec<GroupUsage>, PlatformError> {
    let from = (now_ms - period_ms + HOUR_MS - 1).div_euclid(HOUR_MS) * HOUR_MS;
    let rows: Vec<(String, f64, f64)> = sqlx::query_as(
        // Summed per machine first, from the covering index on (machine,
        // hour, minutes, utilisation) (migration 0012): a week of 1,000
        // GPUs is 168,000 hour rows, and joining each to its machine and
        // group cost more than the sums.
        "SELECT gr.name, SUM(r.held), SUM(r.used) FROM ( \
           SELECT machine_id, SUM(minutes) / 60.0 AS held, SUM(util_mean * minutes) / 6000.0 AS used FROM gpu_rollup_1h \
           WHERE machine_id IN (SELECT id FROM machines) AND bucket_ms >= ? GROUP BY machine_id) r \
         JOIN machines m ON m.id = r.machine_id JOIN groups gr ON gr.id = m.group_id \
         GROUP BY gr.name ORDER BY gr.name",
    )
    .bind(from)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(group, held_gpu_hours, used_gpu_hours)| GroupUsage { group, held_gpu_hours, used_gpu_hours })
        .collect())
}

/// Counts for `/metrics`: (state, count) of nodes, machines and tasks, and
/// per group (name, quota, in use).
pub struct Counts {
    /// Lost nodes' GPUs have no gauges; this says why they went.
    pub nodes: Vec<(String, i64)>,
    pub machines: Vec<(String, i64)>,
    pub tasks: Vec<(String, i64)>,
    pub groups: Vec<(String, i64, i64)>,
}

pub async fn counts(pool: &Pool) -> Result<Counts, PlatformError> {
    Ok(Counts {
        nodes: sqlx::query_as("SELECT state, COUNT(*) FROM nodes GROUP BY state ORDER BY state")
            .fetch_all(pool)
            .await?,
        machines: sqlx::query_as("SELECT state, COUNT(*) FROM machines GROUP BY state ORDER BY state")
            .fetch_all(pool)
            .await?,
        tasks: sqlx::query_as("SELECT state, COUNT(*) FROM tasks GROUP BY state ORDER BY state")
            .fetch_all(pool)
            .await?,
        groups: sqlx::query_as("SELECT name, gpu_quota, gpus_in_use FROM groups ORDER BY name").fetch_all(pool).await?,
    })
}

/// Sets the simulated pattern of a machine's GPUs (None: back to the
/// default). Unknown patterns are refused and change nothing.
pub async fn set_sim_pattern(
    pool: &Pool,
    actor_id: i64,
    machine_id: i64,
    pattern: Option<&str>,
) -> Result<(), PlatformError> {
    if let Some(p) = pattern {
        if gantry_core::telemetry::SimPattern::parse(p).is_none() {
            return Err(PlatformError::BadRequest(format!(
                "unknown simulated pattern \"{p}\" (idle, training, notebook or hot)"
            )));
        }
    }
    let mut tx = pool.begin().await?;
    let name: Option<String> = sqlx::query_scalar("UPDATE machines SET sim_pattern = ? WHERE id = ? RETURNING name")
        .bind(pattern)
        .bind(machine_id)
        .fetch_optional(&mut *tx)
        .await?;
    let name = name.ok_or_else(|| PlatformError::NotFound(format!("machine #{machine_id}")))?;
    let detail = format!("machine {name} (#{machine_id}): simulated pattern {}", pattern.unwrap_or("default"));
    crate::audit::record(&mut *tx, Some(actor_id), "machine.sim_pattern", &detail).await?;
    tx.commit().await?;
    Ok(())
}

/// The simulated pattern set for a machine's GPUs (`None` inside: the
/// default); `None`: no such machine.
pub async fn sim_pattern(pool: &Pool, machine_id: i64) -> Result<Option<Option<String>>, PlatformError> {
    Ok(sqlx::query_scalar("SELECT sim_pattern FROM machines WHERE id = ?")
        .bind(machine_id)
        .fetch_optional(pool)
        .await?)
}
