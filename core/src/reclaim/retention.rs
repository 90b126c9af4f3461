//! The idle and hot windows are read from raw GPU samples only, and raw
//! samples are kept `--telemetry-raw-hours` (older ones live on as
//! rollups, which say nothing about gaps). A window longer than that can
//! never be covered, so no machine would ever be called idle (or hot): the
//! feature would be on and silently never act. Such settings are refused
//! when saved, and flagged when a restart shortened the retention.

use super::{format_left, ReclaimSettings};
use crate::rebalance::HotSettings;

/// Why these windows cannot be watched while raw samples are kept for
/// `raw_keep_secs`; empty when they can. A window equal to the retention
/// is fine: samples at its far edge may be pruned, but the gap allowed
/// (a quarter of the window) covers that.
pub fn windows_outlast_samples(reclaim: &ReclaimSettings, hot: &HotSettings, raw_keep_secs: i64) -> Vec<String> {
    let windows = [
        ("idle window", reclaim.window_secs, "no machine would ever be reclaimed"),
        ("hot window", hot.window_secs, "no machine would ever be moved off a hot GPU"),
    ];
    windows
        .into_iter()
        .filter(|(_, window, _)| *window > raw_keep_secs)
        .map(|(what, window, effect)| {
            format!(
                "the {what} ({}) is longer than raw GPU samples are kept ({}, GANTRY_TELEMETRY_RAW_HOURS): {effect}; shorten the window or keep samples longer",
                format_left(window),
                format_left(raw_keep_secs)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(idle: i64, hot: i64) -> (ReclaimSettings, HotSettings) {
        (
            ReclaimSettings { window_secs: idle, ..ReclaimSettings::default() },
            HotSettings { window_secs: hot, ..HotSettings::default() },
        )
    }

    #[test]
    fn windows_up_to_the_retention_fit() {
        let (r, h) = settings(3600, 3600);
        assert!(windows_outlast_samples(&r, &h, 3600).is_empty());
        let (r, h) = settings(2 * 3600, 600);
        assert!(windows_outlast_samples(&r, &h, 24 * 3600).is_empty());
    }

    #[test]
    fn a_longer_window_is_named_with_both_durations() {
        let (r, h) = settings(3660, 600);
        let why = windows_outlast_samples(&r, &h, 3600);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(
            why[0].starts_with("the idle window (1 h 01 min) is longer than raw GPU samples are kept (1 h 00 min"),
            "{}",
            why[0]
        );
        assert!(why[0].contains("no machine would ever be reclaimed"), "{}", why[0]);
        let (r, h) = settings(48 * 3600, 86_400);
        let why = windows_outlast_samples(&r, &h, 12 * 3600);
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(why[0].contains("(48 h 00 min)") && why[1].starts_with("the hot window (24 h 00 min)"), "{why:?}");
    }
}
