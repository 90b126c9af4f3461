//! Hot-GPU rebalancing: when a machine's GPU stays at or above the hot
//! utilisation threshold for a whole window while the node is contended
//! (another machine's GPU on the node is hot too, or this GPU throttles),
//! the machine is re-placed on free GPUs of the same model on the same node
//! that are cooler than every GPU it leaves. A machine that cannot be
//! moved, or was moved less than [`MOVE_COOLDOWN_SECS`] ago, gets a refusal
//! with the reason. Pure: the platform gathers the windows and the last
//! moves, and applies the verdicts.
//!
//! Only utilisation makes a GPU hot. Memory use does not: frameworks such
//! as TensorFlow reserve nearly all GPU memory at start, so a full GPU may
//! be idle, and a move to another GPU of the same model frees no memory
//! anyway. Temperature alone does not either: a GPU that is not busy gains
//! nothing from a move, which restarts the machine (its running processes
//! are lost).

use serde::{Deserialize, Serialize};

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

/// A machine moved by a rebalance is not moved again for this long: a move
/// restarts it, and a workload that restarts hot would otherwise be moved
/// back and forth. A constant rather than a setting: the settings are
/// columns of their own, and this needs no tuning per installation.
pub const MOVE_COOLDOWN_SECS: i64 = 6 * 3600;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HotSettings {
    pub enabled: bool,
    /// Hot: utilisation at or above this for the whole window.
    pub util_pct: f64,
    /// Memory used as a share of the GPU's memory, in %. Stored and checked
    /// with the other settings but not used to decide (see the module doc).
    pub mem_pct: f64,
    /// Stored and checked, not used to decide (see the module doc); moves
    /// still go only to GPUs cooler than those left.
    pub temp_c: f64,
    pub window_secs: i64,
}

impl Default for HotSettings {
    fn default() -> Self {
        HotSettings { enabled: true, util_pct: 90.0, mem_pct: 95.0, temp_c: 85.0, window_secs: 10 * 60 }
    }
}

impl HotSettings {
    pub fn check(&self) -> Result<(), String> {
        for (what, v) in [("hot utilisation", self.util_pct), ("hot memory", self.mem_pct)] {
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("the {what} threshold must be between 0 and 100 %"));
            }
        }
        if !(20.0..=120.0).contains(&self.temp_c) {
            return Err("the hot temperature must be between 20 and 120 °C".into());
        }
        if !(60..=86_400).contains(&self.window_secs) {
            return Err("the hot window must be between 1 minute and 1 day".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HotSample {
    pub at: i64,
    pub util_pct: f64,
    /// Only reported in a verdict's reason (an admin sees that a GPU was
    /// full as well as busy); never a cause of a move.
    pub mem_pct: f64,
    pub temp_c: f64,
    pub throttled: bool,
}

/// One GPU of the node with its recent samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuWindow {
    pub gpu_id: i64,
    pub index: u32,
    pub model: String,
    /// The machine holding it; `None`: free.
    pub holder: Option<i64>,
    /// When the holder got it (unix s): its last create, restart,
    /// reinstall, restore or move — the time idle reclaim counts from too.
    /// A held GPU is hot only if it was held since the window began;
    /// `None` on a held GPU (not known) means never hot. Unused when free.
    pub held_since: Option<i64>,
    pub samples: Vec<HotSample>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineOnNode {
    pub id: i64,
    pub name: String,
    /// The owner opted it out: never moved.
    pub opted_out: bool,
    /// When its last rebalance ran (unix s), if it was ever moved.
    pub last_moved_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Verdict {
    /// Re-place the machine: GPUs `from` (all it holds) become `to`.
    Move { machine_id: i64, from: Vec<i64>, to: Vec<i64>, why: String },
    /// Hot and contended, but no move is possible.
    Refuse { machine_id: i64, reason: String },
}

/// Mean temperature over the window: how warm a GPU runs. `None` without
/// samples (an unknown GPU is never a target: it might be hotter).
fn heat(g: &GpuWindow, from: i64, now: i64) -> Option<f64> {
    let temps: Vec<f64> = g.samples.iter().filter(|s| s.at >= from && s.at <= now).map(|s| s.temp_c).collect();
    (!temps.is_empty()).then(|| temps.iter().sum::<f64>() / temps.len() as f64)
}

/// Utilisation only: memory and temperature never make a sample hot (see
/// the module doc).
fn sample_hot(s: &HotSample, t: &HotSettings) -> bool {
    s.util_pct >= t.util_pct
}

/// Hot for the whole window: a held GPU was held by its machine since the
/// window began (a machine created, restarted or moved inside it has not
/// run hot for a window, whatever its samples say), samples cover the
/// window (no gap over a quarter of it, as for idle reclaim) and every one
/// of them is hot.
pub fn is_hot(g: &GpuWindow, t: &HotSettings, now: i64) -> bool {
    hot_span(g, t, now).is_some()
}

/// How long the samples of a hot GPU cover (first to last sample inside
/// the window, in seconds): what a verdict reports, rather than the
/// configured window. `None` when the GPU is not hot (see [`is_hot`]).
pub fn hot_span(g: &GpuWindow, t: &HotSettings, now: i64) -> Option<i64> {
    let from = now - t.window_secs;
    if g.holder.is_some() && g.held_since.is_none_or(|since| since > from) {
        return None;
    }
    let mut inside: Vec<&HotSample> = g.samples.iter().filter(|s| s.at >= from && s.at <= now).collect();
    if inside.is_empty() || !inside.iter().all(|s| sample_hot(s, t)) {
        return None;
    }
    inside.sort_by_key(|s| s.at);
    let gap = (t.window_secs / 4).max(1);
    let mut previous = from;
    for at in inside.iter().map(|s| s.at).chain(std::iter::once(now)) {
        if at - previous > gap {
            return None;
        }
        previous = at;
    }
    Some(inside[inside.len() - 1].at - inside[0].at)
}

fn mean(g: &GpuWindow, from: i64, now: i64, f: impl Fn(&HotSample) -> f64) -> f64 {
    let v: Vec<f64> = g.samples.iter().filter(|s| s.at >= from && s.at <= now).map(f).collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Verdicts for the hot, contended machines of one node, hottest first;
/// GPUs given to one move are not offered to the next.
pub fn decide_node(
    node: &str,
    gpus: &[GpuWindow],
    machines: &[MachineOnNode],
    t: &HotSettings,
    now: i64,
) -> Vec<Verdict> {
    if !t.enabled {
        return Vec::new();
    }
    let from = now - t.window_secs;
    let hot: Vec<&GpuWindow> = gpus.iter().filter(|g| g.holder.is_some() && is_hot(g, t, now)).collect();
    let mut free: Vec<&GpuWindow> =
        gpus.iter().filter(|g| g.holder.is_none() && !is_hot(g, t, now) && heat(g, from, now).is_some()).collect();
    free.sort_by(|a, b| {
        heat(a, from, now)
            .partial_cmp(&heat(b, from, now))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.index.cmp(&b.index))
    });
    let mut candidates: Vec<(&MachineOnNode, f64)> = machines
        .iter()
        .filter(|m| !m.opted_out && hot.iter().any(|g| g.holder == Some(m.id)))
        .map(|m| {
            (
                m,
                hot.iter()
                    .filter(|g| g.holder == Some(m.id))
                    .filter_map(|g| heat(g, from, now))
                    .fold(f64::MIN, f64::max),
            )
        })
        .collect();
    candidates.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal).then(a.0.id.cmp(&b.0.id)));

    let mut verdicts = Vec::new();
    for (m, _) in candidates {
        let own: Vec<&GpuWindow> = gpus.iter().filter(|g| g.holder == Some(m.id)).collect();
        let own_hot: Vec<&&GpuWindow> = own.iter().filter(|g| hot.iter().any(|h| h.gpu_id == g.gpu_id)).collect();
        let throttled = own_hot.iter().find(|g| g.samples.iter().any(|s| s.at >= from && s.throttled));
        let neighbour = hot.iter().find(|g| g.holder != Some(m.id));
        let contention = match (throttled, neighbour) {
            (Some(g), _) => format!("GPU {} throttled", g.index),
            (None, Some(n)) => format!("GPU {} of another machine is also hot", n.index),
            (None, None) => continue,
        };
        let g = own_hot[0];
        let span = crate::reclaim::format_left(hot_span(g, t, now).unwrap_or_default());
        let why_hot = format!(
            "GPU {} ran hot for {span} (mean {:.0} % utilisation, threshold {:.0} %; {:.0} % memory, {:.0} °C) and {contention}",
            g.index,
            mean(g, from, now, |s| s.util_pct),
            t.util_pct,
            mean(g, from, now, |s| s.mem_pct),
            mean(g, from, now, |s| s.temp_c),
        );
        // Checked before anything is offered to it, so the GPUs it would
        // have taken stay free for the next machine.
        if let Some(ago) = m.last_moved_at.map(|at| now - at).filter(|ago| *ago < MOVE_COOLDOWN_SECS) {
            verdicts.push(Verdict::Refuse {
                machine_id: m.id,
                reason: format!(
                    "{why_hot}; it was moved {} ago, and a machine is not moved again within {} h of its last move (a move restarts it)",
                    crate::reclaim::format_left(ago),
                    MOVE_COOLDOWN_SECS / 3600
                ),
            });
            continue;
        }
        // Cooler than every GPU it leaves: a machine whose own GPUs have no
        // readings cannot be compared, so it is not moved.
        let coolest_own = own.iter().map(|g| heat(g, from, now).unwrap_or(f64::MIN)).fold(f64::MAX, f64::min);
        let model = &own[0].model;
        // Allocation gives a machine GPUs of one model; anything else is a
        // record this rule cannot pair GPU for GPU, so it stays put.
        if own.iter().any(|g| &g.model != model) {
            verdicts.push(Verdict::Refuse {
                machine_id: m.id,
                reason: format!("{why_hot}; it holds GPUs of more than one model, so no like-for-like move exists"),
            });
            continue;
        }
        let fits: Vec<&GpuWindow> = free
            .iter()
            .copied()
            .filter(|f| &f.model == model && heat(f, from, now).is_some_and(|h| h < coolest_own))
            .take(own.len())
            .collect();
        if fits.len() < own.len() {
            verdicts.push(Verdict::Refuse {
                machine_id: m.id,
                reason: format!(
                    "{why_hot}; node {node} has {} free {model} GPU(s) cooler than {coolest_own:.0} °C, {} needed; \
                     moving to another node needs its data volume copied while it is stopped, which is not done automatically",
                    fits.len(),
                    own.len()
                ),
            });
            continue;
        }
        let to_desc = fits
            .iter()
            .map(|f| format!("GPU {} ({:.0} °C)", f.index, heat(f, from, now).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(", ");
        let to: Vec<i64> = fits.iter().map(|f| f.gpu_id).collect();
        free.retain(|f| !to.contains(&f.gpu_id));
        verdicts.push(Verdict::Move {
            machine_id: m.id,
            from: own.iter().map(|g| g.gpu_id).collect(),
            to,
            why: format!("{why_hot}; moved to {to_desc} on node {node}"),
        });
    }
    verdicts
}

/// Mean temperature of a GPU over the window, for tests and events.
pub fn mean_temp(g: &GpuWindow, t: &HotSettings, now: i64) -> Option<f64> {
    heat(g, now - t.window_secs, now)
}
