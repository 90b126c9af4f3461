//! Idle reclaim: when a machine's GPUs have done nothing for a whole window,
//! its owner is warned; after a grace period (possibly extended a limited
//! number of times) the machine is snapshotted and its GPUs go back to the
//! group. This module only decides, from the samples and settings it is
//! given; the platform's reclaim loop reads them and applies the result.
//!
//! Times are unix seconds throughout.

use serde::{Deserialize, Serialize};

mod retention;
pub use retention::windows_outlast_samples;

crate::task::string_enum! {
    /// What happened to a machine beyond its tasks (`machine_events.kind`,
    /// the words migration 0034's CHECK constraint allows).
    MachineEventKind, "machine event" {
        /// Idle for a whole window: reclaimed at the deadline unless used.
        ReclaimWarning => "reclaim_warning",
        /// The warning was withdrawn (its GPUs were used again, or exempted).
        ReclaimCleared => "reclaim_cleared",
        /// The owner pushed the deadline back.
        Extended => "extended",
        Reclaimed => "reclaimed",
        Restored => "restored",
        /// Moved to cooler GPUs of its node.
        Rebalanced => "rebalanced",
        RebalanceRefused => "rebalance_refused",
        Snapshot => "snapshot",
        /// Its filesystem outside /data neared its group's limit.
        DiskWarning => "disk_warning",
        /// Stopped: its filesystem outside /data went over the limit.
        DiskStopped => "disk_stopped",
    }
}

impl MachineEventKind {
    /// A step of an idle reclaim (its warning, its withdrawal, the reclaim):
    /// charts mark these in the warning colour.
    pub fn is_reclaim(self) -> bool {
        matches!(
            self,
            MachineEventKind::ReclaimWarning | MachineEventKind::ReclaimCleared | MachineEventKind::Reclaimed
        )
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

/// The administrator's settings (one row in `reclaim_settings`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReclaimSettings {
    /// Off: nobody is warned or reclaimed.
    pub enabled: bool,
    /// A GPU at or below this utilisation (%) counts as idle.
    pub threshold_pct: f64,
    /// How long every sample must be idle before a warning.
    pub window_secs: i64,
    /// Time between the warning and the reclaim.
    pub grace_secs: i64,
    /// How many times an owner may push the deadline back per warning.
    pub extensions_allowed: u32,
    /// How far one extension pushes the deadline.
    pub extension_secs: i64,
}

impl Default for ReclaimSettings {
    fn default() -> Self {
        ReclaimSettings {
            enabled: true,
            threshold_pct: 5.0,
            window_secs: 2 * 3600,
            grace_secs: 30 * 60,
            extensions_allowed: 2,
            extension_secs: 2 * 3600,
        }
    }
}

impl ReclaimSettings {
    /// Settings an admin may save; the message names the field to fix.
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=100.0).contains(&self.threshold_pct) || self.threshold_pct.is_nan() {
            return Err("the idle threshold must be between 0 and 100 %".into());
        }
        if !(60..=30 * 86_400).contains(&self.window_secs) {
            return Err("the idle window must be between 1 minute and 30 days".into());
        }
        if !(0..=7 * 86_400).contains(&self.grace_secs) {
            return Err("the grace period must be between 0 and 7 days".into());
        }
        if self.extensions_allowed > 100 {
            return Err("at most 100 extensions may be allowed".into());
        }
        if !(10..=30 * 86_400).contains(&self.extension_secs) {
            return Err("an extension must be between 10 seconds and 30 days".into());
        }
        Ok(())
    }

    /// The longest gap between samples that still counts as watching the
    /// machine: a quarter of the window, so a sampler that stopped for a
    /// while never makes a machine look idle.
    pub fn max_gap_secs(&self) -> i64 {
        (self.window_secs / 4).max(1)
    }
}

/// One utilisation reading of one of the machine's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UtilSample {
    pub at: i64,
    pub util_pct: f64,
}

/// What is known about one machine's reclaim standing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Standing {
    /// When the machine (re)started: it cannot have been idle before.
    pub active_since: i64,
    /// The deadline of the current warning, if warned.
    pub deadline: Option<i64>,
    pub extensions_used: u32,
    /// Its group or the machine itself is exempt.
    pub exempt: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Decision {
    /// Nothing to do (busy, exempt, not watched long enough, or warned and
    /// still inside the grace period).
    Ok,
    /// Idle for the whole window: warn the owner; reclaim at `until`.
    Warn { until: i64, peak_pct: f64 },
    /// Warned, but the GPUs are busy again (or it became exempt): the
    /// warning is withdrawn.
    Clear { reason: String },
    /// Warned, the deadline passed and it is still idle: reclaim.
    Reclaim { peak_pct: f64 },
}

/// The highest utilisation among samples in `[now - window, now]` taken
/// after the machine started, if they cover that span without a gap longer
/// than [`ReclaimSettings::max_gap_secs`]; `None` when they do not (not
/// enough evidence to call it idle).
pub fn covered_peak(samples: &[UtilSample], settings: &ReclaimSettings, active_since: i64, now: i64) -> Option<f64> {
    let from = now - settings.window_secs;
    if active_since > from {
        return None;
    }
    let mut times: Vec<i64> = samples.iter().filter(|s| s.at >= from && s.at <= now).map(|s| s.at).collect();
    if times.is_empty() {
        return None;
    }
    times.sort_unstable();
    let gap = settings.max_gap_secs();
    let mut previous = from;
    for t in times.iter().copied().chain(std::iter::once(now)) {
        if t - previous > gap {
            return None;
        }
        previous = t;
    }
    Some(samples.iter().filter(|s| s.at >= from && s.at <= now).map(|s| s.util_pct).fold(f64::MIN, f64::max))
}

/// The decision for a machine with one GPU (see [`decide_gpus`]).
pub fn decide(samples: &[UtilSample], settings: &ReclaimSettings, standing: &Standing, now: i64) -> Decision {
    decide_gpus(&[samples], settings, standing, now)
}

/// The decision for one machine, from each of its GPUs' samples. A machine
/// with any sample above the threshold in the window is never warned and
/// never reclaimed; it is idle only if *every* GPU's own samples cover the
/// window — a GPU that could not be read says nothing about idleness,
/// whatever its siblings read.
pub fn decide_gpus(per_gpu: &[&[UtilSample]], settings: &ReclaimSettings, standing: &Standing, now: i64) -> Decision {
    let samples: Vec<UtilSample> = per_gpu.iter().flat_map(|s| s.iter().copied()).collect();
    let samples = samples.as_slice();
    let warned = standing.deadline.is_some();
    if !settings.enabled || standing.exempt {
        return if warned { Decision::Clear { reason: "exempt from idle reclaim".into() } } else { Decision::Ok };
    }
    let from = now - settings.window_secs;
    let busy = samples
        .iter()
        .filter(|s| s.at >= from && s.at <= now)
        .find(|s| s.util_pct > settings.threshold_pct || s.util_pct.is_nan());
    if let Some(busy) = busy {
        return if warned {
            Decision::Clear {
                reason: format!(
                    "GPU utilisation {:.0} % is above the idle threshold of {:.0} % again",
                    busy.util_pct, settings.threshold_pct
                ),
            }
        } else {
            Decision::Ok
        };
    }
    if per_gpu.is_empty() {
        return Decision::Ok;
    }
    let peaks: Option<Vec<f64>> =
        per_gpu.iter().map(|s| covered_peak(s, settings, standing.active_since, now)).collect();
    let Some(peak_pct) = peaks.map(|p| p.into_iter().fold(f64::MIN, f64::max)) else {
        return Decision::Ok;
    };
    match standing.deadline {
        None => Decision::Warn { until: now + settings.grace_secs, peak_pct },
        Some(deadline) if now >= deadline => Decision::Reclaim { peak_pct },
        Some(_) => Decision::Ok,
    }
}

/// The owner asks for more time: the new deadline, or why not.
pub fn extend(settings: &ReclaimSettings, standing: &Standing, now: i64) -> Result<i64, String> {
    let Some(deadline) = standing.deadline else {
        return Err("this machine has no reclaim warning to extend".into());
    };
    if standing.extensions_used >= settings.extensions_allowed {
        return Err(format!(
            "this machine has used {} of {} extension(s); use its GPUs, or snapshot it and let it be reclaimed",
            standing.extensions_used, settings.extensions_allowed
        ));
    }
    Ok(deadline.max(now) + settings.extension_secs)
}

/// The shortest wait before a failed reclaim is tried again, whatever the
/// grace period (which may be 0): a reclaim that keeps failing (a full
/// disk) must not be retried, with a failed snapshot each time, at every pass.
pub const RETRY_MIN_SECS: i64 = 5 * 60;
/// The longest wait between two tries.
pub const RETRY_MAX_SECS: i64 = 24 * 3600;

/// How long after its `failures`-th failed reclaim since the warning (1 for
/// the first) a machine is tried again: the grace period (at least
/// [`RETRY_MIN_SECS`]), doubled for each further failure, at most
/// [`RETRY_MAX_SECS`]. The owner gets that time as a new deadline.
pub fn retry_delay(settings: &ReclaimSettings, failures: u32) -> i64 {
    let base = settings.grace_secs.max(RETRY_MIN_SECS);
    let doublings = failures.saturating_sub(1).min(20);
    base.saturating_mul(1_i64 << doublings).min(RETRY_MAX_SECS)
}

/// "1 h 05 min" / "4 min 10 s" / "12 s", for warnings and banners.
pub fn format_left(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        s if s >= 3600 => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{} min {:02} s", s / 60, s % 60),
        s => format!("{s} s"),
    }
}
