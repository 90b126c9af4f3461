//! The cluster overview (admins): a heatmap of every GPU's current
//! utilisation with who holds it, and per group the GPU-hours held against
//! those used over a chosen period — how much of what a group holds it
//! actually uses.

use crate::{
    api::telemetry::cluster_overview,
    components::{chart_heatmap::Heatmap, poll::poll},
};
use gantry_core::telemetry::{view::GroupUsage, USAGE_PERIODS};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn OverviewPage() -> impl IntoView {
    let query = use_query_map();
    let period = Memo::new(move |_| {
        query.with(|q| {
            q.get("period")
                .filter(|p| gantry_core::telemetry::usage_period_ms(p).is_some())
                .unwrap_or_else(|| "24h".into())
        })
    });
    let data = Resource::new(move || period.get(), cluster_overview);
    let links = USAGE_PERIODS.map(|(p, _)| {
        let class = move || if period.get() == p { "active" } else { "" };
        view! { <a href=format!("?period={p}") class=class>{p}</a> }
    });
    view! {
        {poll(Signal::stored(false))}
        <Title text="Cluster overview"/>
        <h1>"Cluster overview"</h1>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || data.get().map(|r| match r {
                    Ok(o) => view! {
                        <section class="card stack">
                            <h2>"GPUs now"</h2>
                            <p class="muted small">"Colour: current utilisation (grey idle → green → yellow → red busy). Label: machine · owner. A node's name opens its charts."</p>
                            <div class="heatmap-wrap">
                                {if o.cells.is_empty() { view! { <p class="muted">"No GPUs."</p> }.into_any() } else { view! { <Heatmap cells=o.cells.clone()/> }.into_any() }}
                            </div>
                        </section>
                        <UsageTable usage=o.usage.clone() period=o.period.clone()/>
                    }
                    .into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
            })}
        </Transition>
        <nav class="state-links" aria-label="Period">{links}</nav>
    }
}

/// Held vs used per group, with a bar: the full bar is held, the filled
/// part used.
#[component]
fn UsageTable(usage: Vec<GroupUsage>, period: String) -> impl IntoView {
    let most = usage.iter().map(|u| u.held_gpu_hours).fold(0.0, f64::max).max(1e-9);
    let rows = usage
        .into_iter()
        .map(|u| {
            let held_w = 200.0 * u.held_gpu_hours / most;
            let used_w = 200.0 * u.used_gpu_hours / most;
            view! {
                <tr data-group=u.group.clone()>
                    <td>{u.group.clone()}</td>
                    <td class="num" data-testid="held">{format!("{:.1}", u.held_gpu_hours)}</td>
                    <td class="num" data-testid="used">{format!("{:.1}", u.used_gpu_hours)}</td>
                    <td class="num">{format!("{:.0}%", u.efficiency_pct())}</td>
                    <td>
                        <svg width="200" height="12" viewBox="0 0 200 12" role="img" aria-label=format!("{:.0}% of held GPU-hours used", u.efficiency_pct())>
                            <rect width=held_w height="12" rx="2" fill="#d0d5dd"/>
                            <rect width=used_w height="12" rx="2" fill="#16a34a"/>
                        </svg>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="card stack">
            <h2>{format!("GPU-hours held vs used, last {period}")}</h2>
            <p class="muted small">"Held: hours a group's machines held GPUs. Used: those hours weighted by the GPUs' utilisation."</p>
            <table class="table" data-testid="held-vs-used">
                <thead><tr><th>"Group"</th><th>"Held (GPU-h)"</th><th>"Used (GPU-h)"</th><th>"Used / held"</th><th></th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </section>
    }
}
