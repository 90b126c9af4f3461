//! The sampler: every pass reads each GPU of every node that is not lost —
//! through NVML for this node's real GPUs, from the simulated source for
//! simulated ones — and attributes the reading to the machine holding it.

use super::{nvml, GpuSample};
use crate::{db::Pool, PlatformError};
use gantry_core::{
    task::MachineState,
    telemetry::{simulate, SimPattern},
};

/// A pass's reading of one GPU: the stored sample plus what only the latest
/// reading keeps.
#[derive(Debug, Clone)]
pub struct Reading {
    pub sample: GpuSample,
    pub source: &'static str,
    pub processes: String,
}

/// (gpu, node, uuid, memory, simulated, holding machine, its state, its pattern)
type GpuRow = (i64, i64, String, i64, bool, Option<i64>, Option<String>, Option<String>);

/// The pattern a held simulated GPU follows: the machine's setting, else
/// notebook. A machine that is not running leaves its GPUs idle.
fn pattern_of(state: Option<MachineState>, setting: Option<&str>) -> Option<SimPattern> {
    match state {
        Some(MachineState::Running) => Some(setting.and_then(SimPattern::parse).unwrap_or(SimPattern::Notebook)),
        _ => None,
    }
}

/// Reads every GPU at `now_ms`.
pub async fn collect(pool: &Pool, now_ms: i64) -> Result<Vec<Reading>, PlatformError> {
    let rows: Vec<GpuRow> = sqlx::query_as(
        "SELECT g.id, g.node_id, g.uuid, g.memory_mb, g.simulated, mg.machine_id, m.state, m.sim_pattern \
         FROM gpus g JOIN nodes n ON n.id = g.node_id \
         LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id LEFT JOIN machines m ON m.id = mg.machine_id \
         WHERE n.state <> 'lost' ORDER BY g.id",
    )
    .fetch_all(pool)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for (gpu_id, node_id, uuid, memory_mb, simulated, machine_id, state, setting) in rows {
        let (reading, mem_total_mb, source, processes) = if simulated {
            let state =
                state.map(MachineState::try_from).transpose().map_err(|e| PlatformError::Internal(e.to_string()))?;
            let pattern = pattern_of(state, setting.as_deref());
            (simulate(pattern, gpu_id, now_ms, memory_mb), memory_mb, "simulated", "[]".to_string())
        } else {
            // A real GPU of another node has no NVML here: not sampled.
            let Some(r) = nvml::read(&uuid) else { continue };
            (r.reading, r.mem_total_mb, "nvml", r.processes)
        };
        out.push(Reading {
            sample: GpuSample {
                gpu_id,
                at_ms: now_ms,
                node_id,
                machine_id,
                util_pct: reading.util_pct,
                mem_used_mb: reading.mem_used_mb,
                mem_total_mb,
                temp_c: reading.temp_c,
                power_w: reading.power_w,
                throttled: reading.throttled,
            },
            source,
            processes,
        });
    }
    Ok(out)
}

/// Stores readings: the samples, and each GPU's latest reading.
pub async fn write(pool: &Pool, readings: &[Reading]) -> Result<(), PlatformError> {
    let samples: Vec<GpuSample> = readings.iter().map(|r| r.sample.clone()).collect();
    super::insert_samples(pool, &samples).await?;
    let mut tx = pool.begin().await?;
    for r in readings {
        let s = &r.sample;
        sqlx::query(
            "INSERT OR REPLACE INTO gpu_latest (gpu_id, at_ms, machine_id, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, throttled, source, processes) \
             SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM gpus WHERE id = ?)",
        )
        .bind(s.gpu_id)
        .bind(s.at_ms)
        .bind(s.machine_id)
        .bind(s.util_pct)
        .bind(s.mem_used_mb)
        .bind(s.mem_total_mb)
        .bind(s.temp_c)
        .bind(s.power_w)
        .bind(s.throttled)
        .bind(r.source)
        .bind(&r.processes)
        .bind(s.gpu_id)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// One sampling pass at an injected time, written before it returns: what
/// tests and the reclaim tests use. Returns the GPUs sampled.
pub async fn sample_once(pool: &Pool, now_ms: i64) -> Result<usize, PlatformError> {
    let readings = collect(pool, now_ms).await?;
    write(pool, &readings).await?;
    Ok(readings.len())
}
