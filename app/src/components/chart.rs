//! Server-rendered SVG line charts of GPU series: utilisation or memory in
//! percent over a time range, threshold lines, event markers. Plain SVG
//! attributes only (no inline style, no script), so a page is complete
//! without JavaScript and within the content security policy; live.js
//! brings the page's new data by fetching the page again.

use gantry_core::telemetry::view::{ChartData, GpuSeries};
use leptos::prelude::*;

pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 180.0;
/// Room for the y labels on the left and the time labels below.
const LEFT: f64 = 34.0;
const BOTTOM: f64 = 18.0;

/// Distinct colours for up to eight GPUs (then repeating).
pub const PALETTE: [&str; 8] = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#0891b2", "#db2777", "#65a30d", "#dc2626"];

pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Which value a chart draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Util,
    Memory,
}

/// `d` attribute of a series' path in the plot area: one line through
/// its points, broken (a new `M`) wherever neighbours are more than two
/// steps apart — the GPU was not read for this machine then, and a line
/// across would show readings that never were. A point alone between
/// breaks is a short dash, so it still shows.
pub fn path(series: &GpuSeries, metric: Metric, from_ms: i64, to_ms: i64, step_ms: i64) -> String {
    let span = (to_ms - from_ms).max(1) as f64;
    let total = series.mem_total_mb.max(1) as f64;
    let mut d = String::new();
    let mut previous: Option<i64> = None;
    let points = &series.points;
    for (i, p) in points.iter().enumerate() {
        let pct = match metric {
            Metric::Util => p.util,
            Metric::Memory => 100.0 * p.mem_mb / total,
        };
        let (x, y) = (x_of(p.at_ms - from_ms, span), y_of(pct));
        let joined = previous.is_some_and(|at| p.at_ms - at <= 2 * step_ms.max(1));
        let alone = !joined && points.get(i + 1).is_none_or(|next| next.at_ms - p.at_ms > 2 * step_ms.max(1));
        if !d.is_empty() {
            d.push(' ');
        }
        match (joined, alone) {
            (true, _) => d.push_str(&format!("L{x:.1},{y:.1}")),
            (false, false) => d.push_str(&format!("M{x:.1},{y:.1}")),
            (false, true) => d.push_str(&format!("M{x:.1},{y:.1} h1")),
        }
        previous = Some(p.at_ms);
    }
    d
}

fn x_of(offset_ms: i64, span: f64) -> f64 {
    LEFT + (offset_ms as f64 / span).clamp(0.0, 1.0) * (WIDTH - LEFT)
}

fn y_of(pct: f64) -> f64 {
    (HEIGHT - BOTTOM) * (1.0 - pct.clamp(0.0, 100.0) / 100.0)
}

/// "HH:MM" (UTC) for ranges up to a day, "MM-DD" beyond.
fn time_label(at_ms: i64, span_ms: i64) -> String {
    let text = gantry_core::time::format_utc(at_ms.div_euclid(1000));
    if span_ms > 24 * 3_600_000 {
        text[5..10].to_string()
    } else {
        text[11..16].to_string()
    }
}

/// One chart: `data`'s series as lines, with the thresholds (utilisation
/// only) and the machine's events.
#[component]
pub fn SeriesChart(
    data: ChartData,
    metric: Metric,
    #[prop(into)] title: String,
    #[prop(into)] testid: String,
) -> impl IntoView {
    let (from, to) = (data.from_ms, data.to_ms);
    let span = (to - from).max(1);
    let points: usize = data.series.iter().map(|s| s.points.len()).sum();
    let last = data.series.iter().filter_map(|s| s.points.last().map(|p| p.at_ms)).max().unwrap_or(0);
    let plot_h = HEIGHT - BOTTOM;
    let grid = [0.0, 50.0, 100.0].map(|pct| {
        view! {
            <line x1=LEFT x2=WIDTH y1=y_of(pct) y2=y_of(pct) stroke="#d0d5dd" stroke-width="1"/>
            <text x=LEFT - 4.0 y=y_of(pct) + 4.0 text-anchor="end" font-size="10" fill="#667085">{format!("{pct:.0}%")}</text>
        }
    });
    let ticks = (0..=4).map(|i| {
        let at = from + span * i / 4;
        let x = x_of(at - from, span as f64);
        let anchor = match i {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        view! { <text x=x y=HEIGHT - 4.0 text-anchor=anchor font-size="10" fill="#667085">{time_label(at, span)}</text> }
    });
    let thresholds = (metric == Metric::Util).then(|| {
        [(data.reclaim_pct, "#b42318", "reclaim"), (data.hot_pct, "#dc6803", "hot")].map(|(pct, colour, name)| {
            view! {
                <line class="threshold" data-threshold=name x1=LEFT x2=WIDTH y1=y_of(pct) y2=y_of(pct) stroke=colour stroke-width="1" stroke-dasharray="5 4">
                    <title>{format!("{name} threshold: {pct:.0}%")}</title>
                </line>
                <text x=WIDTH - 2.0 y=y_of(pct) - 3.0 text-anchor="end" font-size="10" fill=colour>{format!("{name} {pct:.0}%")}</text>
            }
        })
    });
    let events = data.events.iter().map(|e| {
        let x = x_of(e.at_ms - from, span as f64);
        let colour = if e.kind.is_reclaim() { "#b42318" } else { "#475467" };
        view! {
            <line class="event" data-kind=e.kind.as_str() x1=x x2=x y1="0" y2=plot_h stroke=colour stroke-width="1.5">
                <title>{format!("{} at {} UTC: {}", e.kind.as_str().replace('_', " "), gantry_core::time::format_utc(e.at_ms / 1000), e.detail)}</title>
            </line>
            <circle cx=x cy="4" r="3.5" fill=colour/>
        }
    });
    let lines = data.series.iter().enumerate().map(|(i, s)| {
        view! {
            <path class="series" data-gpu=s.gpu_id d=path(s, metric, from, to, data.step_ms) fill="none" stroke=colour(i) stroke-width="1.5" stroke-linejoin="round">
                <title>{s.label.clone()}</title>
            </path>
        }
    });
    let label = format!(
        "{title}, {} to {} UTC",
        gantry_core::time::format_utc(from / 1000),
        gantry_core::time::format_utc(to / 1000)
    );
    view! {
        <figure class="chart">
            <figcaption>{title}</figcaption>
            <svg class="chart-svg" data-testid=testid data-points=points data-last=last viewBox=format!("0 0 {WIDTH} {HEIGHT}")
                 preserveAspectRatio="none" role="img" aria-label=label>
                <rect x=LEFT y="0" width=WIDTH - LEFT height=plot_h fill="#fcfcfd" stroke="#d0d5dd"/>
                {grid}
                {ticks.collect_view()}
                {thresholds}
                {lines.collect_view()}
                {events.collect_view()}
            </svg>
        </figure>
    }
}

/// The colour key of a chart's GPUs.
#[component]
pub fn Legend(series: Vec<GpuSeries>) -> impl IntoView {
    let items = series.into_iter().enumerate().map(|(i, s)| {
        view! {
            <li>
                <svg width="12" height="12" viewBox="0 0 12 12" aria-hidden="true"><rect width="12" height="12" rx="2" fill=colour(i)/></svg>
                " " {s.label}
            </li>
        }
    });
    view! { <ul class="chart-legend">{items.collect_view()}</ul> }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_core::telemetry::view::ChartPoint;

    #[test]
    fn points_map_time_to_x_and_percent_to_y_inside_the_plot() {
        let p = |at_ms, util, mem_mb| ChartPoint { at_ms, util, util_max: util, mem_mb };
        let s = GpuSeries {
            gpu_id: 1,
            label: "g".into(),
            mem_total_mb: 1000,
            points: vec![p(0, 0.0, 500.0), p(1000, 100.0, 1000.0), p(2000, 150.0, 0.0)],
        };
        assert_eq!(path(&s, Metric::Util, 0, 2000, 1000), format!("M{LEFT:.1},162.0 L337.0,0.0 L{WIDTH:.1},0.0"));
        assert_eq!(path(&s, Metric::Memory, 0, 2000, 1000), format!("M{LEFT:.1},81.0 L337.0,0.0 L{WIDTH:.1},162.0"));
        assert_eq!(time_label(3_600_000 * 25 + 60_000, 3_600_000), "01:01");
    }

    #[test]
    fn a_gap_of_more_than_two_steps_breaks_the_line_and_a_lone_point_still_shows() {
        let p = |at_ms| ChartPoint { at_ms, util: 50.0, util_max: 50.0, mem_mb: 0.0 };
        // Steps of 10; one missing point (a gap of 20) is joined; a gap of 40 is not.
        let s = GpuSeries {
            gpu_id: 1,
            label: "g".into(),
            mem_total_mb: 1,
            points: vec![p(0), p(10), p(30), p(70), p(110), p(120)],
        };
        let d = path(&s, Metric::Util, 0, 120, 10);
        let moves: Vec<&str> = d.split(' ').filter(|c| c.starts_with('M')).collect();
        assert_eq!(moves.len(), 3, "{d}");
        assert_eq!(d.matches('L').count(), 3, "{d}");
        assert!(d.contains(" h1 "), "the point at 70 stands alone: {d}");
        assert_eq!(time_label(0, 7 * 24 * 3_600_000), "01-01");
    }
}
