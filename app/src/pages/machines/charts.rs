//! The machine page's GPU charts: utilisation and memory of each GPU over
//! 1 h / 24 h / 7 d (chosen by a link, so it works without JavaScript),
//! with the reclaim and hot thresholds and the reclaim events marked.
//! Rendered on the server; live.js fetches the page again on its idle
//! cadence, so new samples appear without a reload.

use crate::{
    api::telemetry::{machine_chart, sim_pattern, SetSimPattern},
    components::{
        chart::{Legend, Metric, SeriesChart},
        form_error::{error, FormError},
        poll::poll,
        status::tag,
    },
};
use gantry_core::telemetry::{view::ChartData, ChartRange, Resolution, SimPattern};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// The range the page's query asks for (`?range=24h`), else 1 h.
pub fn query_range() -> Memo<ChartRange> {
    let query = use_query_map();
    Memo::new(move |_| query.with(|q| q.get("range").and_then(|r| ChartRange::parse(&r)).unwrap_or_default()))
}

#[component]
pub fn RangeLinks(range: Memo<ChartRange>) -> impl IntoView {
    let links = ChartRange::ALL.map(|r| {
        let class = move || if range.get() == r { "active" } else { "" };
        view! { <a href=format!("?range={}", r.as_str()) class=class data-range=r.as_str()>{r.as_str()}</a> }
    });
    view! { <nav class="state-links chart-ranges" aria-label="Chart range">{links}</nav> }
}

/// Both charts and the legend of one answer.
#[component]
pub fn ChartPair(data: ChartData, #[prop(into)] prefix: String) -> impl IntoView {
    if data.series.iter().all(|s| s.points.is_empty()) {
        return view! { <p class="muted" data-testid=format!("{prefix}-no-data")>"No samples in this range yet."</p> }
            .into_any();
    }
    let source = format!(
        "from {} samples",
        match data.resolution {
            Resolution::Raw => "raw".to_string(),
            rollup => format!("{rollup} rollups of"),
        }
    );
    view! {
        <p class="muted small">
            {source} {data.simulated.then(|| view! { " " {tag("simulated", "no NVIDIA driver: these series come from the simulated source")} })}
        </p>
        <SeriesChart data=data.clone() metric=Metric::Util title="GPU utilisation (%)" testid=format!("{prefix}-util-chart")/>
        <SeriesChart data=data.clone() metric=Metric::Memory title="GPU memory used (%)" testid=format!("{prefix}-mem-chart")/>
        <Legend series=data.series/>
    }
    .into_any()
}

#[component]
pub fn MachineCharts(id: Signal<Option<i64>>) -> impl IntoView {
    let range = query_range();
    let chart = Resource::new(
        move || (id.get(), range.get()),
        move |(id, range)| machine_chart(id.unwrap_or(0), range.as_str().to_string()),
    );
    let is_admin = crate::signed_in().is_some_and(|m| m.is_admin());
    view! {
        // New samples arrive every interval: refreshed on the idle cadence.
        {poll(Signal::stored(false))}
        <section class="card stack" data-testid="machine-charts">
            <div class="page-head">
                <h2>"GPU utilisation"</h2>
                <RangeLinks range=range/>
            </div>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || chart.get().map(|r| match r {
                    Ok(data) => view! { <ChartPair data=data prefix="machine"/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
            {is_admin.then(|| view! { <PatternControl id=id/> })}
        </section>
    }
}

/// The admin's choice of simulated pattern for this machine's GPUs.
#[component]
fn PatternControl(id: Signal<Option<i64>>) -> impl IntoView {
    let set = ServerAction::<SetSimPattern>::new();
    let current = Resource::new(move || (id.get(), set.version().get()), |(id, _)| sim_pattern(id.unwrap_or(0)));
    let options = move |now: String| {
        std::iter::once("default")
            .chain(SimPattern::ALL.iter().map(|p| p.as_str()))
            .map(|p| view! { <option value=p selected=now == p>{p}</option> })
            .collect_view()
    };
    view! {
        <Suspense fallback=|| ()>
            {move || current.get().and_then(Result::ok).map(|now| view! {
                <ActionForm action=set attr:class="inline-form" attr:data-testid="sim-pattern-form">
                    <input type="hidden" name="machine_id" value=id.get().unwrap_or(0)/>
                    <label>"Simulated pattern (admin) "
                        <select name="pattern" data-testid="sim-pattern">{options(now)}</select>
                    </label>
                    " "<button type="submit">"Set"</button>
                    <FormError message=error(set)/>
                </ActionForm>
            })}
        </Suspense>
    }
}
