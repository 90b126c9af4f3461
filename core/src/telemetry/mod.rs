//! Pure telemetry rules: which stored resolution serves a chart range, the
//! chart ranges the portal offers, and the simulated GPU source's patterns.

mod sim;
pub mod view;

pub use sim::{simulate, SimPattern, SimReading};

/// Thresholds drawn on charts until the reclaim settings say otherwise.
pub const DEFAULT_RECLAIM_PCT: f64 = 5.0;
pub const DEFAULT_HOT_PCT: f64 = 90.0;

pub const MINUTE_MS: i64 = 60_000;
pub const HOUR_MS: i64 = 3_600_000;

crate::task::string_enum! {
    /// Where a query reads from: raw samples, 1-minute or 1-hour rollups.
    Resolution, "chart resolution" {
        Raw => "raw",
        Minute => "1m",
        Hour => "1h",
    }
}

impl Resolution {
    /// Width of one point, given the sampling interval for raw samples.
    pub fn step_ms(self, interval_ms: i64) -> i64 {
        match self {
            Resolution::Raw => interval_ms.max(1),
            Resolution::Minute => MINUTE_MS,
            Resolution::Hour => HOUR_MS,
        }
    }
}

/// How long each resolution is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub raw_ms: i64,
    pub minute_ms: i64,
    pub hour_ms: i64,
}

/// Fewest points a chart should have; fewer looks like a staircase.
pub const MIN_POINTS: i64 = 100;

/// The coarsest resolution that still gives a chart of `[from_ms, to_ms]`
/// at least [`MIN_POINTS`] points and is still kept back to `from_ms`
/// (retention counted from `now_ms`). When none gives enough points, the
/// finest one kept that far back; when none is kept that far, hours.
pub fn choose_resolution(from_ms: i64, to_ms: i64, now_ms: i64, interval_ms: i64, keep: Retention) -> Resolution {
    let span = (to_ms - from_ms).max(0);
    let kept = |r: Resolution| {
        let keep_ms = match r {
            Resolution::Raw => keep.raw_ms,
            Resolution::Minute => keep.minute_ms,
            Resolution::Hour => keep.hour_ms,
        };
        from_ms >= now_ms - keep_ms
    };
    let coarse_to_fine = [Resolution::Hour, Resolution::Minute, Resolution::Raw];
    if let Some(r) = coarse_to_fine.iter().copied().find(|r| kept(*r) && span / r.step_ms(interval_ms) >= MIN_POINTS) {
        return r;
    }
    coarse_to_fine.iter().rev().copied().find(|r| kept(*r)).unwrap_or(Resolution::Hour)
}

/// Most points a chart draws per GPU.
pub const MAX_POINTS: i64 = 300;

/// Width of one drawn point: the resolution's step, widened by whole steps
/// until the span needs at most [`MAX_POINTS`].
pub fn point_step_ms(span_ms: i64, resolution_step_ms: i64) -> i64 {
    let step = resolution_step_ms.max(1);
    let steps = (span_ms.max(0) + step * MAX_POINTS - 1) / (step * MAX_POINTS);
    step * steps.max(1)
}

/// Periods the held-vs-used table offers, as (text, milliseconds).
pub const USAGE_PERIODS: [(&str, i64); 3] =
    [("24h", 24 * HOUR_MS), ("7d", 7 * 24 * HOUR_MS), ("30d", 30 * 24 * HOUR_MS)];

pub fn usage_period_ms(s: &str) -> Option<i64> {
    USAGE_PERIODS.iter().find(|(name, _)| *name == s).map(|(_, ms)| *ms)
}

/// The ranges the charts offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChartRange {
    #[default]
    Hour,
    Day,
    Week,
}

impl ChartRange {
    pub const ALL: [ChartRange; 3] = [ChartRange::Hour, ChartRange::Day, ChartRange::Week];

    pub fn parse(s: &str) -> Option<ChartRange> {
        match s {
            "1h" => Some(ChartRange::Hour),
            "24h" => Some(ChartRange::Day),
            "7d" => Some(ChartRange::Week),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChartRange::Hour => "1h",
            ChartRange::Day => "24h",
            ChartRange::Week => "7d",
        }
    }

    pub fn span_ms(self) -> i64 {
        match self {
            ChartRange::Hour => HOUR_MS,
            ChartRange::Day => 24 * HOUR_MS,
            ChartRange::Week => 7 * 24 * HOUR_MS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: Retention =
        Retention { raw_ms: 24 * HOUR_MS, minute_ms: 8 * 24 * HOUR_MS, hour_ms: 400 * 24 * HOUR_MS };
    const NOW: i64 = 1_000 * 24 * HOUR_MS;

    fn pick(range: ChartRange) -> Resolution {
        choose_resolution(NOW - range.span_ms(), NOW, NOW, 10_000, KEEP)
    }

    #[test]
    fn each_chart_range_reads_the_coarsest_rollup_that_serves_it() {
        assert_eq!(pick(ChartRange::Hour), Resolution::Raw);
        assert_eq!(pick(ChartRange::Day), Resolution::Minute);
        assert_eq!(pick(ChartRange::Week), Resolution::Hour);
    }

    #[test]
    fn a_range_older_than_a_retention_skips_that_resolution() {
        // An hour ending two days ago: raw samples are gone, minutes serve.
        let from = NOW - 49 * HOUR_MS;
        assert_eq!(choose_resolution(from, from + HOUR_MS, NOW, 10_000, KEEP), Resolution::Minute);
        // A day ending a month ago: only hours are kept.
        let from = NOW - 30 * 24 * HOUR_MS;
        assert_eq!(choose_resolution(from, from + 24 * HOUR_MS, NOW, 10_000, KEEP), Resolution::Hour);
        // Older than everything: hours (which will be empty).
        assert_eq!(choose_resolution(0, HOUR_MS, NOW, 10_000, KEEP), Resolution::Hour);
    }

    #[test]
    fn a_short_range_falls_back_to_the_finest_kept() {
        // Five minutes: no resolution gives 100 points, raw is finest.
        assert_eq!(choose_resolution(NOW - 300_000, NOW, NOW, 10_000, KEEP), Resolution::Raw);
        // A faster sampler makes raw serve ranges it could not before.
        assert_eq!(choose_resolution(NOW - 300_000, NOW, NOW, 1_000, KEEP), Resolution::Raw);
        // With raw retention shorter than the range, minutes serve an hour.
        let keep = Retention { raw_ms: 10 * MINUTE_MS, ..KEEP };
        assert_eq!(choose_resolution(NOW - HOUR_MS, NOW, NOW, 10_000, keep), Resolution::Minute);
    }

    #[test]
    fn points_are_widened_to_whole_steps_until_few_enough() {
        assert_eq!(point_step_ms(HOUR_MS, 10_000), 20_000);
        assert_eq!(point_step_ms(HOUR_MS, 1_000), 12_000);
        assert_eq!(point_step_ms(24 * HOUR_MS, MINUTE_MS), 5 * MINUTE_MS);
        assert_eq!(point_step_ms(7 * 24 * HOUR_MS, HOUR_MS), HOUR_MS);
        assert_eq!(point_step_ms(0, 0), 1);
        for (span, step) in [(HOUR_MS, 10_000), (24 * HOUR_MS, MINUTE_MS), (7 * 24 * HOUR_MS, MINUTE_MS)] {
            let s = point_step_ms(span, step);
            assert!(s % step == 0 && span / s <= MAX_POINTS);
        }
        assert_eq!(usage_period_ms("7d"), Some(7 * 24 * HOUR_MS));
        assert_eq!(usage_period_ms("1y"), None);
    }

    #[test]
    fn chart_ranges_round_trip_and_refuse_unknown_text() {
        for r in ChartRange::ALL {
            assert_eq!(ChartRange::parse(r.as_str()), Some(r));
        }
        assert_eq!(ChartRange::parse("2h"), None);
        assert_eq!(ChartRange::parse(""), None);
    }
}
