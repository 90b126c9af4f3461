//! One node's GPUs over 1 h / 24 h / 7 d, whoever held them (admins).

use crate::{
    api::telemetry::node_chart,
    components::poll::poll,
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
    let chart =
        Resource::new(move || (id.get(), range.get()), move |(id, range)| node_chart(id, range.as_str().to_string()));
    view! {
        {poll(Signal::stored(false))}
        <p class="crumbs"><a href="/admin/overview">"← Cluster overview"</a> " · " <a href="/admin/nodes">"Nodes"</a></p>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || chart.get().map(|r| match r {
                    Ok((name, data)) => view! {
                        <Title text=format!("Node {name}")/>
                        <div class="page-head"><h1 data-testid="node-name">{format!("Node {name}")}</h1><RangeLinks range=range/></div>
                        <section class="card stack" data-testid="node-charts">
                            <ChartPair data=data prefix="node"/>
                        </section>
                    }
                    .into_any(),
                    Err(e) => view! { <p class="form-error" data-testid="node-error">{e.to_string()}</p> }.into_any(),
            })}
        </Transition>
    }
}
