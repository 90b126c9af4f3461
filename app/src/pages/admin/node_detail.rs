//! One node's GPUs over 1 h / 24 h / 7 d, whoever held them (admins).

use crate::{
    api::telemetry::node_chart,
    components::{
        poll::{poll_guarded, tracked},
        polled::last_good,
    },
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
    let live = poll_guarded(tick, Signal::stored(false), in_flight);
    // Keep the last good answer while a refetch runs or fails.
    let last = StoredValue::new(None);
    view! {
        {live}
        <p class="crumbs"><a href="/admin/overview">"← Cluster overview"</a> " · " <a href="/admin/nodes">"Nodes"</a></p>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || {
                match last_good(chart, last) {
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
