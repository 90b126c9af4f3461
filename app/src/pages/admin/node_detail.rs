//! One node's GPUs over 1 h / 24 h / 7 d, whoever held them (admins).

use crate::{
    api::telemetry::node_chart,
    components::poll::{poll_guarded, tracked},
    model::telemetry::ChartData,
    pages::machines::charts::{query_range, ChartPair, RangeLinks},
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn NodeDetailPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.with(|p| p.get("id").and_then(|s| s.parse::<i64>().ok()).unwrap_or(0)));
    let range = query_range();
    let tick = RwSignal::new(0u64);
    let in_flight = RwSignal::new(false);
    let chart = Resource::new(
        move || (id.get(), range.get(), tick.get()),
        move |(id, range, _)| tracked(in_flight, node_chart(id, range.as_str().to_string())),
    );
    poll_guarded(tick, Signal::stored(false), in_flight);
    let shown = Memo::new(move |prev: Option<&Option<(String, ChartData)>>| {
        chart.with(|r| match r {
            Some(Ok(d)) => Some(d.clone()),
            _ => prev.cloned().flatten(),
        })
    });
    view! {
        <p class="crumbs"><a href="/admin/overview">"← Cluster overview"</a> " · " <a href="/admin/nodes">"Nodes"</a></p>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || {
                let error = chart.with(|r| r.as_ref().and_then(|r| r.as_ref().err().map(|e| e.to_string())));
                match (shown.get(), error) {
                    (Some((name, data)), _) => view! {
                        <Title text=format!("Node {name}")/>
                        <div class="page-head"><h1 data-testid="node-name">{format!("Node {name}")}</h1><RangeLinks range=range/></div>
                        <section class="card stack" data-testid="node-charts">
                            <ChartPair data=data prefix="node"/>
                        </section>
                    }
                    .into_any(),
                    (None, Some(e)) => view! { <p class="form-error" data-testid="node-error">{e}</p> }.into_any(),
                    (None, None) => ().into_any(),
                }
            }}
        </Transition>
    }
}
