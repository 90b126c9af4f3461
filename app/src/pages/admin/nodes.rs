//! Worker nodes: where they are, whether they are alive, their GPUs, the
//! state an admin sets (ready, draining, down), marking a node lost, and
//! adding a node by its engine endpoint.
//!
//! The page polls, and a refetch must never reset what an admin is typing:
//! the add form sits outside the refetched part, and the table's rows are
//! built once per set of nodes, each reading its own fields from the latest
//! answer, so a row's forms stay the same elements between polls.

use crate::{
    api::{
        catalogue::list_regions,
        fleet::{list_nodes, AddNode, MarkNodeLost, RemoveNode, SetNodeState},
    },
    components::{
        confirm::tick_to_confirm,
        form_error::{error_text, FormError},
        poll::{poll_guarded, tracked},
        stable::stable,
        status::tag,
    },
    error::AppError,
    model::{
        catalogue::{RegionRow, ARCHES},
        fleet::{capacity_label, endpoint_label, lost_summary, NodeRow, DEFAULT_REGION, SETTABLE_STATES},
    },
};
use gantry_core::alloc::NodeState;
use leptos::prelude::*;
use leptos_meta::Title;

type Nodes = Resource<Result<Vec<NodeRow>, AppError>>;

/// The per-node actions, owned by the page so a result survives a poll.
#[derive(Clone, Copy)]
struct NodeActions {
    set_state: ServerAction<SetNodeState>,
    mark_lost: ServerAction<MarkNodeLost>,
    remove: ServerAction<RemoveNode>,
}

#[component]
pub fn NodesPage() -> impl IntoView {
    let add = ServerAction::<AddNode>::new();
    let set_state = ServerAction::<SetNodeState>::new();
    let mark_lost = ServerAction::<MarkNodeLost>::new();
    let remove = ServerAction::<RemoveNode>::new();
    let actions = NodeActions { set_state, mark_lost, remove };
    let tick = RwSignal::new(0u64);
    let in_flight = RwSignal::new(false);
    let nodes = Resource::new(
        move || {
            (
                tick.get(),
                add.version().get(),
                set_state.version().get(),
                mark_lost.version().get(),
                remove.version().get(),
            )
        },
        move |_| tracked(in_flight, list_nodes()),
    );
    // Heartbeats and free GPUs change on their own; refresh now and then.
    let live = poll_guarded(tick, Signal::stored(false), in_flight);
    // The add form's region choices, fetched once so the form is built once.
    let regions = Resource::new(|| (), |_| list_regions());
    view! {
        {live}
        <Title text="Nodes"/>
        <h1>"Nodes"</h1>
        <section class="card stack">
            <p class="muted small">
                "A node takes new machines only when it is ready and its last heartbeat is recent. "
                "Draining keeps the machines it has; down takes nothing new either. "
                "Lost is for a node that is gone for good: its machines are released and their GPUs return to their groups."
            </p>
            <FormError message=Signal::derive(move || set_state.value().with(error_text))/>
            <FormError message=Signal::derive(move || mark_lost.value().with(error_text))/>
            <FormError message=Signal::derive(move || remove.value().with(error_text))/>
            {move || crate::components::nojs_done::answer(remove).map(|name| view! {
                <p class="form-ok" role="status" data-testid="node-removed">"Removed node " <strong>{name}</strong></p>
            })}
            {move || crate::components::nojs_done::answer(mark_lost).map(|l| view! {
                <p class="form-ok" role="status" data-testid="node-lost-ok">{lost_summary(&l)}</p>
            })}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                <NodeTable nodes=nodes actions=actions/>
            </Transition>
        </section>
        <section class="card">
            <h2>"Add a node"</h2>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || regions.get().map(|r| match r {
                    Ok(list) => view! { <AddNodeForm add=add regions=list/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn NodeTable(nodes: Nodes, actions: NodeActions) -> impl IntoView {
    // Changes only when a node appears or goes, not on every poll; while a
    // refetch runs (the resource may read as not loaded) the rows stay, so
    // an admin's half-made choice in a row's state select is not rebuilt.
    // A failed refetch (the network, a busy server) keeps the rows too.
    let ids = stable(move |prev: Option<&Option<Result<Vec<i64>, AppError>>>| {
        let now = nodes.with(|r| {
            r.as_ref().map(|r| r.as_ref().map(|l| l.iter().map(|n| n.id).collect::<Vec<_>>()).map_err(Clone::clone))
        });
        match (now, prev.cloned().flatten()) {
            (None, last) | (Some(Err(_)), last @ Some(Ok(_))) => last,
            (now, _) => now,
        }
    });
    move || {
        match ids.get()? {
        Ok(ids) if ids.is_empty() => Some(view! { <p class="muted" data-testid="no-nodes">"No worker nodes have registered yet."</p> }.into_any()),
        Ok(ids) => Some(
            view! {
                <table class="table" data-testid="nodes">
                    <thead>
                        <tr>
                            <th>"Name"</th><th>"Region"</th><th>"Executor"</th><th>"Endpoint"</th><th>"State"</th>
                            <th>"Last heartbeat (UTC)"</th><th>"CPUs · memory"</th><th>"GPUs free / total"</th><th>"Models"</th><th>"Manage"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {ids.into_iter().map(|id| view! { <NodeLine id=id nodes=nodes actions=actions/> }).collect_view()}
                    </tbody>
                </table>
            }
            .into_any(),
        ),
        Err(e) => Some(view! { <p class="form-error">{e.to_string()}</p> }.into_any()),
    }
    }
}

#[component]
fn NodeLine(id: i64, nodes: Nodes, actions: NodeActions) -> impl IntoView {
    // The row's latest data; a node missing from one answer keeps its last.
    let row = stable(move |prev: Option<&NodeRow>| {
        let latest = nodes
            .with(|r| r.as_ref().and_then(|r| r.as_ref().ok()).and_then(|l| l.iter().find(|n| n.id == id).cloned()));
        latest.or_else(|| prev.cloned()).unwrap_or_default()
    });
    let state = stable(move |_| row.with(|n| n.state.clone()));
    let lost = stable(move |_| state.get() == NodeState::Lost.as_str());
    let name = row.with_untracked(|n| n.name.clone());
    let badge =
        move || format!("badge node {}", state.get().parse::<NodeState>().map(NodeState::as_str).unwrap_or("unknown"));
    let heartbeat = move || {
        row.with(|n| {
            if n.last_heartbeat > 0 {
                gantry_core::time::format_utc(n.last_heartbeat)
            } else {
                "never".to_string()
            }
        })
    };
    let stale = move || {
        (!row.with(|n| n.heartbeat_fresh) && !lost.get())
            .then(|| view! { " " {tag("stale", "no recent heartbeat: the node takes no new machines")} })
    };
    let simulated = move || {
        row.with(|n| n.simulated)
            .then(|| view! { " " {tag("simulated", "no NVIDIA driver seen: the GPUs are simulated or declared by an administrator")} })
    };
    let unenforced = move || {
        let n = row.with(|n| n.unenforced_volumes);
        (n > 0).then(|| {
            let text = if n == 1 { "1 volume without a size limit".to_string() } else { format!("{n} volumes without a size limit") };
            view! { " " <span class="tag" data-testid="node-unenforced" title="loop-device volumes were unavailable on this node (its log says why): these machines' volumes are plain Docker volumes, and their size is not a hard limit">{text}</span> }
        })
    };
    let removing = actions.remove.pending();
    let manage = {
        let name = name.clone();
        move || {
            if lost.get() {
                let question = format!(
                    "Remove node {name}? It is forgotten for good: leftovers on its engine are no longer collected."
                );
                view! {
                <span class="muted small">"its machines were released"</span>
                <ActionForm action=actions.remove attr:class="inline" attr:data-testid="node-remove">
                    <input type="hidden" name="node_id" value=id/>
                    {tick_to_confirm("remove it")}
                    <button type="submit" class="danger" title="forget this node; leftovers on its engine are no longer collected"
                        disabled=move || removing.get() data-confirm=question>"Remove"</button>
                </ActionForm>
            }.into_any()
            } else {
                view! { <NodeForms id=id name=name.clone() state=state set_state=actions.set_state mark_lost=actions.mark_lost/> }.into_any()
            }
        }
    };
    view! {
        <tr data-testid="node-row" data-name=name.clone() data-state=move || state.get()>
            <td><strong>{name.clone()}</strong></td>
            <td>{move || row.with(|n| n.region.clone())}</td>
            <td>{move || row.with(|n| n.executor.clone())} {simulated} {unenforced}</td>
            <td><code>{move || row.with(|n| endpoint_label(&n.docker_endpoint))}</code></td>
            <td>
                <span class=badge data-testid="node-state">{move || state.get()}</span>
                {move || row.with(|n| (!n.state_reason.is_empty()).then(|| n.state_reason.clone())).map(|r| view! {
                    <div class="muted small" data-testid="node-reason">{r}</div>
                })}
            </td>
            <td class="nowrap">{heartbeat} {stale}</td>
            <td class="nowrap">{move || row.with(|n| capacity_label(n.cpu_count, n.memory_mb))}</td>
            <td>{move || row.with(|n| format!("{} / {}", n.gpu_free, n.gpu_total))}</td>
            <td>{move || row.with(|n| if n.gpu_models.is_empty() { "—".to_string() } else { n.gpu_models.join(", ") })}</td>
            <td>{manage}</td>
        </tr>
    }
}

/// A live node's two forms: set its state, or mark it lost (a reason and a
/// ticked checkbox, which works without JavaScript too).
#[component]
fn NodeForms(
    id: i64,
    name: String,
    state: Signal<String>,
    set_state: ServerAction<SetNodeState>,
    mark_lost: ServerAction<MarkNodeLost>,
) -> impl IntoView {
    let (state_label, reason_label, lost_label) =
        (format!("State of {name}"), format!("State reason for {name}"), format!("Why {name} is lost"));
    view! {
        <div class="stack node-forms">
            <ActionForm action=set_state attr:class="inline" attr:data-testid="node-set-state">
                <input type="hidden" name="node_id" value=id/>
                <select name="state" aria-label=state_label>
                    {SETTABLE_STATES.iter().map(|s| {
                        let s = s.as_str();
                        view! { <option value=s selected=move || state.get() == s>{s}</option> }
                    }).collect_view()}
                </select>
                <input type="text" name="reason" maxlength="200" placeholder="reason (optional)" aria-label=reason_label/>
                <button type="submit">"Set"</button>
            </ActionForm>
            <ActionForm action=mark_lost attr:class="inline wrap" attr:data-testid="node-mark-lost">
                <input type="hidden" name="node_id" value=id/>
                <input type="text" name="reason" required maxlength="200" placeholder="why it is lost" aria-label=lost_label/>
                <label class="check small"><input type="checkbox" name="confirm" required/>" I understand its machines will be released"</label>
                <button type="submit" class="danger">"Mark lost"</button>
            </ActionForm>
        </div>
    }
}

#[component]
fn AddNodeForm(add: ServerAction<AddNode>, regions: Vec<RegionRow>) -> impl IntoView {
    let pending = add.pending();
    view! {
        <ActionForm action=add attr:class="stack" attr:data-testid="add-node">
            <p class="muted small">
                "Gantry connects to the node's Docker Engine and saves the node only if the engine answers. "
                "Declare the GPUs the host has; they are shown as declared (simulated), since the host's driver cannot be read from here."
            </p>
            <div class="row">
                <label>"Name" <input type="text" name="name" required maxlength="32" autocomplete="off" placeholder="e.g. gpu-2"/></label>
                <label>"Region"
                    <select name="region_code">
                        {regions.into_iter().map(|r| {
                            let label = format!("{} — {}", r.code, r.name);
                            view! { <option value=r.code.clone() selected=r.code == DEFAULT_REGION>{label}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <label>"Architecture"
                    <select name="arch">
                        {ARCHES.iter().map(|a| view! { <option value=*a>{*a}</option> }).collect_view()}
                    </select>
                </label>
            </div>
            <label>"Endpoint"
                <input type="text" name="endpoint" required maxlength="200" autocomplete="off"
                    placeholder="unix:///run/docker.sock, tcp://host:2375 or tls://host:2376"/>
            </label>
            <div class="row">
                <label>"GPU count" <input type="number" name="gpu_count" min="0" max="64" step="1" value="1"/></label>
                <label>"GPU model" <input type="text" name="gpu_model" maxlength="64" placeholder="e.g. A100-80GB"/></label>
            </div>
            <FormError message=Signal::derive(move || add.value().with(error_text))/>
            {move || crate::components::nojs_done::answer(add).map(|id| view! {
                <p class="form-ok" role="status" data-testid="node-added">"Node #" {id} " added; it is listed above."</p>
            })}
            <button type="submit" class="primary" disabled=pending>
                {move || if pending.get() { "Testing the connection…" } else { "Add node" }}
            </button>
        </ActionForm>
    }
}
