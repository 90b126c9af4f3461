//! Worker nodes: where they are, whether they are alive, their GPUs, and
//! the state an admin sets (ready, draining, down).

use crate::{
    api::fleet::{list_nodes, SetNodeState},
    components::{
        form_error::{error_text, FormError},
        poll::poll,
        status::Tag,
    },
    model::fleet::{endpoint_label, NodeRow},
};
use gantry_core::alloc::NodeState;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NodesPage() -> impl IntoView {
    let set_state = ServerAction::<SetNodeState>::new();
    let tick = RwSignal::new(0u64);
    let nodes = Resource::new(move || (tick.get(), set_state.version().get()), |_| list_nodes());
    // Heartbeats and free GPUs change on their own; refresh now and then.
    poll(tick, Signal::stored(false));
    view! {
        <Title text="Nodes"/>
        <h1>"Nodes"</h1>
        <section class="card">
            <p class="muted small">
                "A node takes new machines only when it is ready and its last heartbeat is recent. "
                "Draining keeps the machines it has; down takes nothing new either."
            </p>
            <FormError message=Signal::derive(move || set_state.value().with(error_text))/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || nodes.get().map(|r| match r {
                    Ok(list) if list.is_empty() => view! {
                        <p class="muted" data-testid="no-nodes">"No worker nodes have registered yet."</p>
                    }.into_any(),
                    Ok(list) => view! {
                        <table class="table" data-testid="nodes">
                            <thead>
                                <tr>
                                    <th>"Name"</th><th>"Region"</th><th>"Executor"</th><th>"Endpoint"</th><th>"State"</th>
                                    <th>"Last heartbeat (UTC)"</th><th>"CPUs · memory"</th><th>"GPUs free / total"</th><th>"Models"</th><th>"Set state"</th>
                                </tr>
                            </thead>
                            <tbody>
                                {list.into_iter().map(|n| view! { <NodeLine node=n set_state=set_state/> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn NodeLine(node: NodeRow, set_state: ServerAction<SetNodeState>) -> impl IntoView {
    let n = node;
    let heartbeat = if n.last_heartbeat > 0 { gantry_core::time::format_utc(n.last_heartbeat) } else { "never".to_string() };
    let state_class = format!("badge node {}", n.state.parse::<NodeState>().map(NodeState::as_str).unwrap_or("unknown"));
    let label = format!("State of {}", n.name);
    let current = n.state.clone();
    view! {
        <tr data-testid="node-row" data-name=n.name.clone() data-state=n.state.clone()>
            <td><strong>{n.name.clone()}</strong></td>
            <td>{n.region.clone()}</td>
            <td>{n.executor.clone()} {n.simulated.then(|| view! { " " <Tag text="simulated" title="no NVIDIA driver: the GPUs are simulated"/> })}</td>
            <td><code>{endpoint_label(&n.docker_endpoint)}</code></td>
            <td><span class=state_class data-testid="node-state">{n.state.clone()}</span></td>
            <td class="nowrap">
                {heartbeat}
                {(!n.heartbeat_fresh).then(|| view! { " " <Tag text="stale" title="no recent heartbeat: the node takes no new machines"/> })}
            </td>
            <td class="nowrap">{format!("{} · {:.1} GiB", n.cpu_count, n.memory_mb as f64 / 1024.0)}</td>
            <td>{format!("{} / {}", n.gpu_free, n.gpu_total)}</td>
            <td>{if n.gpu_models.is_empty() { "—".to_string() } else { n.gpu_models.join(", ") }}</td>
            <td>
                <ActionForm action=set_state attr:class="inline">
                    <input type="hidden" name="node_id" value=n.id/>
                    <select name="state" aria-label=label>
                        {NodeState::ALL.iter().map(|s| {
                            let s = s.as_str();
                            view! { <option value=s selected=s == current>{s}</option> }
                        }).collect_view()}
                    </select>
                    <button type="submit">"Set"</button>
                </ActionForm>
            </td>
        </tr>
    }
}
