//! The cluster heatmap: one cell per GPU, one row per node; the colour is
//! the GPU's current utilisation, the label says who holds it. Plain HTML
//! boxes (colours as inline styles, which the CSP allows): a node's cells
//! wrap to the card's width (an SVG of fixed width ran off the card's edge
//! on a 1366 px screen), and a node's name is an ordinary link beside its
//! cells, not inside an image (axe: no interactive control nested in
//! another or in an image).

use gantry_core::telemetry::view::HeatCell;
use leptos::prelude::*;

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

/// WCAG relative luminance of a `#rrggbb` colour.
fn luminance(hex: &str) -> f64 {
    let channel = |i: usize| {
        let c = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0)) / 255.0;
        if c <= 0.03928 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
}

/// Text colour for a cell of colour `fill`: black or white, whichever
/// contrasts more. One of the two reaches at least 4.58:1 on any colour (the
/// two are equal at luminance 0.179), so every cell's label meets WCAG AA;
/// a fixed switch to white at 88 % gave 3:1 on the orange there.
fn ink(fill: &str) -> &'static str {
    let l = luminance(fill);
    if (1.05 / (l + 0.05)) > ((l + 0.05) / 0.05) {
        "#ffffff"
    } else {
        "#000000"
    }
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

/// The cells grouped by node, in order: (node id, node name, its cells).
fn by_node(cells: Vec<HeatCell>) -> Vec<(i64, String, Vec<HeatCell>)> {
    let mut rows: Vec<(i64, String, Vec<HeatCell>)> = Vec::new();
    for c in cells {
        match rows.last_mut() {
            Some((id, _, cs)) if *id == c.node_id => cs.push(c),
            _ => rows.push((c.node_id, c.node.clone(), vec![c])),
        }
    }
    rows
}

#[component]
pub fn Heatmap(cells: Vec<HeatCell>) -> impl IntoView {
    let body = by_node(cells).into_iter().map(|(id, name, cells)| {
        let cells = cells.into_iter().map(|c| {
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
            let said = tip.clone();
            let fill = util_fill(c.util);
            let style = format!("background:{fill};color:{}", ink(&fill));
            view! {
                <div class="heat-cell" data-gpu=c.gpu_id data-util=c.util.map(|u| format!("{u:.0}")).unwrap_or_default()
                     title=tip style=style>
                    <span class="heat-gpu">{format!("GPU {} · {util_text}", c.idx)}</span>
                    <span class="heat-holder">{holder}</span>
                    <span class="visually-hidden">{said}</span>
                </div>
            }
        });
        view! {
            <div class="heat-node" data-node=id>
                <a class="heat-node-name" href=format!("/admin/nodes/{id}") title=format!("charts of node {name}")>{cut(&name, 16)}</a>
                <div class="heat-cells">{cells.collect_view()}</div>
            </div>
        }
    });
    view! {
        <div class="heatmap" data-testid="heatmap" role="group" aria-label="Current utilisation of every GPU">
            {body.collect_view()}
        </div>
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

    fn contrast(a: &str, b: &str) -> f64 {
        let (x, y) = (luminance(a), luminance(b));
        (x.max(y) + 0.05) / (x.min(y) + 0.05)
    }

    #[test]
    fn every_cell_label_contrasts_at_least_4_5_to_1() {
        assert!((contrast("#000000", "#ffffff") - 21.0).abs() < 1e-9);
        let fills = (0..=1000).map(|u| Some(f64::from(u) / 10.0)).chain([None]);
        for util in fills {
            let fill = util_fill(util);
            let ratio = contrast(ink(&fill), &fill);
            assert!(ratio >= 4.5, "{util:?}: {} on {fill} is {ratio:.2}:1", ink(&fill));
        }
        // Where the old fixed switch to white failed.
        assert_eq!(ink(&util_fill(Some(88.0))), "#000000");
        assert_eq!(ink(&util_fill(Some(100.0))), "#ffffff");
    }
}
