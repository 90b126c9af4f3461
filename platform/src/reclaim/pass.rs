//! One pass of the reclaim loop: idle machines are warned, busy ones lose
//! their warning, warned ones past the deadline are queued for reclaim;
//! then every ready node is checked for hot, contended GPUs. Decisions come
//! from the core; writes go through the transition module.

use super::settings::{load_settings, Settings};
use crate::{
    db::Pool,
    telemetry::gpu_window,
    transitions::{rebalance, reclaim},
    PlatformError,
};
use gantry_core::{
    rebalance::{decide_node, GpuWindow, HotSample, MachineOnNode, Verdict},
    reclaim::{decide_gpus, format_left, Decision, Standing, UtilSample},
};
use std::{sync::Arc, time::Duration};
use tokio::sync::Notify;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    pub warned: Vec<i64>,
    pub cleared: Vec<i64>,
    pub reclaims_queued: Vec<i64>,
    pub moves_queued: Vec<i64>,
    pub moves_refused: Vec<i64>,
}

/// Runs a pass every `interval` until the process ends; wakes the
/// dispatcher when it queued work.
pub async fn run(pool: Pool, wake: Arc<Notify>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let p = pool.clone();
        match crate::contained::pass("reclaim", async move { pass(&p, crate::now()).await }).await {
            Some(Ok(r)) if !r.reclaims_queued.is_empty() || !r.moves_queued.is_empty() => wake.notify_one(),
            Some(Ok(_)) | None => {}
            Some(Err(e)) => tracing::error!(error = %e, "reclaim pass failed"),
        }
    }
}

/// One pass at `now` (unix seconds).
pub async fn pass(pool: &Pool, now: i64) -> Result<PassReport, PlatformError> {
    let settings = load_settings(pool).await?;
    let mut report = PassReport::default();
    idle(pool, &settings, now, &mut report).await?;
    hot(pool, &settings, now, &mut report).await?;
    Ok(report)
}

type Candidate = (i64, String, Option<i64>, i64, bool, i64);

async fn idle(pool: &Pool, settings: &Settings, now: i64, report: &mut PassReport) -> Result<(), PlatformError> {
    let s = &settings.reclaim;
    let machines: Vec<Candidate> = sqlx::query_as(&format!(
        "SELECT m.id, m.name, m.reclaim_deadline, m.reclaim_extensions, (m.reclaim_exempt OR g.reclaim_exempt), {}
         FROM machines m JOIN groups g ON g.id = m.group_id
         WHERE m.state IN ('running', 'stopped') AND m.workload = 'dev'
           AND EXISTS (SELECT 1 FROM machine_gpus mg WHERE mg.machine_id = m.id)",
        crate::transitions::reclaim::LAST_STARTED
    ))
    .fetch_all(pool)
    .await?;
    for (id, name, deadline, used, exempt, active_since) in machines {
        let gpus: Vec<i64> =
            sqlx::query_scalar("SELECT gpu_id FROM machine_gpus WHERE machine_id = ?").bind(id).fetch_all(pool).await?;
        // Only readings taken while this machine held the GPU count, kept
        // per GPU: each must show idleness on its own.
        let window = gpu_window(pool, &gpus, (now - s.window_secs) * 1000, now * 1000).await?;
        let per_gpu: Vec<Vec<UtilSample>> = gpus
            .iter()
            .map(|g| {
                window
                    .iter()
                    .filter(|x| x.gpu_id == *g && x.machine_id == Some(id))
                    .map(|x| UtilSample { at: x.at_ms.div_euclid(1000), util_pct: x.util_pct })
                    .collect()
            })
            .collect();
        let per_gpu: Vec<&[UtilSample]> = per_gpu.iter().map(Vec::as_slice).collect();
        let standing = Standing { active_since, deadline, extensions_used: used.max(0) as u32, exempt };
        match decide_gpus(&per_gpu, s, &standing, now) {
            Decision::Ok => {}
            Decision::Warn { until, peak_pct } => {
                let detail = format!(
                    "machine {name} has used at most {peak_pct:.1} % of its GPUs for {} (threshold {} %); it will be snapshotted and its GPUs \
                     returned in {} unless it is used or extended",
                    format_left(s.window_secs),
                    s.threshold_pct,
                    format_left(until - now)
                );
                if reclaim::warn(pool, id, until, &detail).await? {
                    report.warned.push(id);
                }
            }
            Decision::Clear { reason } => {
                if reclaim::clear(pool, id, &reason).await? {
                    report.cleared.push(id);
                }
            }
            Decision::Reclaim { peak_pct } => {
                let why = format!(
                    "idle reclaim: at most {peak_pct:.1} % GPU utilisation for {} and the warning's deadline passed",
                    format_left(s.window_secs)
                );
                if reclaim::queue(pool, id, now, Some(active_since), &why).await?.is_some() {
                    report.reclaims_queued.push(id);
                }
            }
        }
    }
    Ok(())
}

async fn hot(pool: &Pool, settings: &Settings, now: i64, report: &mut PassReport) -> Result<(), PlatformError> {
    let t = &settings.hot;
    if !t.enabled {
        return Ok(());
    }
    let nodes: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, name FROM nodes WHERE state = 'ready' ORDER BY id").fetch_all(pool).await?;
    for (node_id, node_name) in nodes {
        let rows: Vec<(i64, i64, String, Option<i64>, Option<i64>)> = sqlx::query_as(&format!(
            // A free GPU its node no longer reports is no target, nor one a
            // closed machine's container may still hold until the collector
            // has removed it (the move would be refused only after the
            // machine's container was removed, and recreated where it was).
            // A held GPU comes with when its machine last started, as idle
            // reclaim reads it: it is hot only if held for the whole window.
            "SELECT g.id, g.idx, g.model, mg.machine_id,
                    (SELECT {} FROM machines m WHERE m.id = mg.machine_id)
             FROM gpus g LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id
             WHERE g.node_id = ? AND NOT (mg.machine_id IS NULL AND (g.id IN (SELECT gpu_id FROM gpus_gone)
                                                                     OR g.id IN (SELECT gpu_id FROM gpus_left_to_collector)))
             ORDER BY g.idx",
            crate::transitions::reclaim::LAST_STARTED
        ))
        .bind(node_id)
        .fetch_all(pool)
        .await?;
        if rows.iter().all(|r| r.3.is_none()) {
            continue;
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        let samples = gpu_window(pool, &ids, (now - t.window_secs) * 1000, now * 1000).await?;
        let gpus: Vec<GpuWindow> = rows
            .iter()
            .map(|(gpu_id, idx, model, holder, held_since)| GpuWindow {
                gpu_id: *gpu_id,
                index: *idx as u32,
                model: model.clone(),
                holder: *holder,
                held_since: *held_since,
                samples: samples
                    .iter()
                    .filter(|x| x.gpu_id == *gpu_id && x.machine_id == *holder)
                    .map(|x| HotSample {
                        at: x.at_ms.div_euclid(1000),
                        util_pct: x.util_pct,
                        mem_pct: if x.mem_total_mb > 0 {
                            x.mem_used_mb as f64 * 100.0 / x.mem_total_mb as f64
                        } else {
                            0.0
                        },
                        temp_c: x.temp_c,
                        throttled: x.throttled,
                    })
                    .collect(),
            })
            .collect();
        // The last move is its latest rebalance task that started: a failed
        // one counts too (it may have removed the container already, and
        // retrying at once would fail the same way); one cancelled before
        // it started changed nothing.
        let machines: Vec<MachineOnNode> = sqlx::query_as::<_, (i64, String, bool, Option<i64>)>(
            "SELECT m.id, m.name, m.rebalance_opt_out,
                    (SELECT MAX(t.updated_at) FROM tasks t WHERE t.machine_id = m.id AND t.kind = 'rebalance'
                       AND t.state IN ('running', 'succeeded', 'failed'))
             FROM machines m WHERE m.node_id = ? AND m.state = 'running' AND m.workload = 'dev'",
        )
        .bind(node_id)
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|(id, name, opted_out, last_moved_at)| MachineOnNode { id, name, opted_out, last_moved_at })
        .collect();
        for verdict in decide_node(&node_name, &gpus, &machines, t, now) {
            match verdict {
                Verdict::Move { machine_id, to, why, .. } => {
                    if rebalance::queue(pool, machine_id, &to, &why).await?.is_some() {
                        report.moves_queued.push(machine_id);
                    }
                }
                Verdict::Refuse { machine_id, reason } => {
                    if rebalance::refused(pool, machine_id, &reason).await? {
                        report.moves_refused.push(machine_id);
                    }
                }
            }
        }
    }
    Ok(())
}
