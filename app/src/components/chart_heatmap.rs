//! The cluster heatmap: one cell per GPU, one row per node; the colour is
//! the GPU's current utilisation, the label says who holds it. SVG
//! attributes only, like the line charts.

use gantry_core::telemetry::view::HeatCell;
use leptos::prelude::*;

const CELL_W: f64 = 118.0;
const CELL_H: f64 = 46.0;
const GAP: f64 = 4.0;
const NODE_W: f64 = 110.0;
/// GPUs per row before a node's cells wrap.
const PER_ROW: usize = 8;

/// Cool grey-blue at 0 %, through green and yellow, to red at 100 %; never
/// sampled is light grey.
pub fn util_fill(util: Option<f64>) -> String {
    let Some(u) = util else { return "#eaecf0".into() };
    let stops: [(f64, [f64; 3]); 4] = [
        (0.0, [208.0, 213.0, 221.0]),
        (40.0, [74.0, 222.0, 128.0]),
        (75.0, [250.0, 204.0, 21.0]),
        (100.0, [220.0, 38.0, 38.0]),
    ];
    let u = u.clamp(0.0, 100.0);
    let i = stops.iter().rposition(|(at, _)| *at <= u).unwrap_or(0).min(stops.len() - 2);
    let ((a, ca), (b, cb)) = (stops[i], stops[i + 1]);
    let t = ((u - a) / (b - a)).clamp(0.0, 1.0);
    let c: Vec<u8> = (0..3).map(|k| (ca[k] + (cb[k] - ca[k]) * t).round() as u8).collect();
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// Text colour readable on `util_fill`.
fn ink(util: Option<f64>) -> &'static str {
    if util.is_some_and(|u| u >= 88.0) {
        "#ffffff"
    } else {
        "#101828"
    }
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

#[component]
pub fn Heatmap(cells: Vec<HeatCell>) -> impl IntoView {
    // Rows: each node's cells, wrapped at PER_ROW.
    let mut rows: Vec<(Option<(i64, String)>, Vec<HeatCell>)> = Vec::new();
    for c in cells {
        let new_node = rows.last().and_then(|(_, cs)| cs.last()).is_none_or(|last| last.node_id != c.node_id);
        if new_node {
            rows.push((Some((c.node_id, c.node.clone())), Vec::new()));
        } else if rows.last().is_some_and(|(_, cs)| cs.len() == PER_ROW) {
            rows.push((None, Vec::new()));
        }
        if let Some((_, cs)) = rows.last_mut() {
            cs.push(c);
        }
    }
    let height = rows.len() as f64 * (CELL_H + GAP);
    let width = NODE_W + PER_ROW as f64 * (CELL_W + GAP);
    let body = rows.into_iter().enumerate().map(|(r, (node, cells))| {
        let y = r as f64 * (CELL_H + GAP);
        let label = node.map(|(id, name)| {
            view! {
                <a href=format!("/admin/nodes/{id}")>
                    <text x="0" y=y + CELL_H / 2.0 + 4.0 font-size="12" fill="#1d4ed8">{cut(&name, 16)}</text>
                </a>
            }
        });
        let cells = cells.into_iter().enumerate().map(move |(i, c)| {
            let x = NODE_W + i as f64 * (CELL_W + GAP);
            let util_text = c.util.map(|u| format!("{u:.0}%")).unwrap_or_else(|| "no data".into());
            let holder = match (&c.machine, &c.owner) {
                (Some(m), Some(o)) => format!("{} · {}", cut(m, 9), cut(o, 7)),
                (Some(m), None) => cut(m, 16),
                _ => "free".into(),
            };
            let tip = format!(
                "{} GPU {} ({}{}): {}, {}{}",
                c.node,
                c.idx,
                c.model,
                if c.simulated { ", simulated" } else { "" },
                util_text,
                c.temp_c.map(|t| format!("{t:.0} °C, ")).unwrap_or_default(),
                match (&c.machine, &c.owner, &c.group) {
                    (Some(m), Some(o), Some(g)) => format!("machine {m} of {o} (group {g})"),
                    _ => "free".into(),
                }
            );
            view! {
                <g class="heat-cell" data-gpu=c.gpu_id data-util=c.util.map(|u| format!("{u:.0}")).unwrap_or_default()>
                    <title>{tip}</title>
                    <rect x=x y=y width=CELL_W height=CELL_H rx="4" fill=util_fill(c.util) stroke="#98a2b3" stroke-width="0.5"/>
                    <text x=x + 6.0 y=y + 16.0 font-size="11" font-weight="600" fill=ink(c.util)>{format!("GPU {} · {util_text}", c.idx)}</text>
                    <text x=x + 6.0 y=y + 34.0 font-size="10" fill=ink(c.util)>{holder}</text>
                </g>
            }
        });
        view! { {label} {cells.collect_view()} }
    });
    view! {
        <svg class="heatmap" data-testid="heatmap" viewBox=format!("0 0 {width} {height}") width=width height=height role="img"
             aria-label="Current utilisation of every GPU">
            {body.collect_view()}
        </svg>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_from_cool_to_red_and_unsampled_is_grey() {
        assert_eq!(util_fill(None), "#eaecf0");
        assert_eq!(util_fill(Some(0.0)), "#d0d5dd");
        assert_eq!(util_fill(Some(40.0)), "#4ade80");
        assert_eq!(util_fill(Some(100.0)), "#dc2626");
        assert_eq!(util_fill(Some(250.0)), util_fill(Some(100.0)));
        assert_eq!(cut("abcdefgh", 5), "abcd…");
        assert_eq!(cut("abc", 5), "abc");
    }
}
