//! Worker nodes: where they are, whether they are alive, their GPUs, the
//! state an admin sets (ready, draining, down), marking a node lost, and
//! adding a node by its engine endpoint.
//!
//! live.js refreshes the page now and then; it keeps what an admin is
//! typing or has chosen in a row's forms (rows are matched by `data-name`).

use crate::{
    api::{
        catalogue::list_regions,
        fleet::{list_nodes, AddNode, MarkNodeLost, RemoveNode, SetNodeState},
    },
    components::{
        confirm::tick_to_confirm,
        form_error::{error, FormError},
        poll::poll,
        status::tag,
    },
    error::AppError,
    model::{
        catalogue::ARCHES,
        fleet::{capacity_label, endpoint_label, DEFAULT_REGION, SETTABLE_STATES},
    },
};
use gantry_core::alloc::NodeState;
use gantry_platform::{catalogue::RegionResources, cluster::NodeSummary};
use leptos::prelude::*;
use leptos_meta::Title;

type Nodes = Resource<Result<Vec<NodeSummary>, AppError>>;

/// The per-node actions, owned by the page: their errors and answers show
/// above the table.
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
    let nodes = Resource::new(|| (), |_| list_nodes());
    // The add form's region choices, fetched once so the form is built once.
    let regions = Resource::new(|| (), |_| list_regions());
    view! {
        // Heartbeats and free GPUs change on their own; refreshed now and then.
        {poll(Signal::stored(false))}
        <Title text="Nodes"/>
        <h1>"Nodes"</h1>
        <section class="card stack">
            <p class="muted small">
                "A node takes new machines only when it is ready and its last heartbeat is recent. "
                "Draining keeps the machines it has; down takes nothing new either. "
                "Lost is for a node that is gone for good: its machines are released and their GPUs return to their groups."
            </p>
            <FormError message=error(set_state)/>
            <FormError message=error(mark_lost)/>
            <FormError message=error(remove)/>
            {crate::components::flash::answer(remove).map(|name| view! {
                <p class="form-ok" role="status" data-testid="node-removed">"Removed node " <strong>{name}</strong></p>
            })}
            {crate::components::flash::answer(mark_lost).map(|l| view! {
                <p class="form-ok" role="status" data-testid="node-lost-ok">{l.summary()}</p>
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
    move || {
        nodes.get().map(|r| match r {
            Ok(list) if list.is_empty() => view! { <p class="muted" data-testid="no-nodes">"No worker nodes have registered yet."</p> }.into_any(),
            Ok(list) => view! {
                <table class="table" data-testid="nodes">
                    <thead>
                        <tr>
                            <th>"Name"</th><th>"Region"</th><th>"Executor"</th><th>"Endpoint"</th><th>"State"</th>
                            <th>"Last heartbeat (UTC)"</th><th>"CPUs · memory"</th><th>"GPUs free / total"</th><th>"Free disk"</th><th>"Models"</th><th>"Manage"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {list.into_iter().map(|n| view! { <NodeLine n=n actions=actions/> }).collect_view()}
                    </tbody>
                </table>
            }
            .into_any(),
            Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
        })
    }
}

#[component]
fn NodeLine(n: NodeSummary, actions: NodeActions) -> impl IntoView {
    let (id, name, state) = (n.id, n.name.clone(), n.state);
    let lost = state == NodeState::Lost;
    let badge = format!("badge node {}", state.as_str());
    let heartbeat =
        if n.last_heartbeat > 0 { gantry_core::time::format_utc(n.last_heartbeat) } else { "never".to_string() };
    let stale = (!n.heartbeat_fresh && !lost)
        .then(|| view! { " " {tag("stale", "no recent heartbeat: the node takes no new machines")} });
    let sim_node = n.executor == "simulated";
    let simulated = if sim_node {
        Some(view! { " " <span class="tag" data-testid="node-simulated" title="a simulated node: its machines are records only (no containers) and its GPUs are simulated">"simulated node"</span> }.into_any())
    } else {
        n.simulated.then(|| view! { " " {tag("simulated", "no NVIDIA driver seen: the GPUs are simulated or declared by an administrator")} }.into_any())
    };
    let unenforced = (n.unenforced_volumes > 0).then(|| {
        let count = n.unenforced_volumes;
        let text = if count == 1 { "1 volume without a size limit".to_string() } else { format!("{count} volumes without a size limit") };
        view! { " " <span class="tag" data-testid="node-unenforced" title="loop-device volumes were unavailable on this node (its log says why): these machines' volumes are plain Docker volumes, and their size is not a hard limit">{text}</span> }
    });
    let manage = if lost {
        let question =
            format!("Remove node {name}? It is forgotten for good: leftovers on its engine are no longer collected.");
        view! {
            <span class="muted small">"its machines were released"</span>
            <ActionForm action=actions.remove attr:class="inline" attr:data-testid="node-remove">
                <input type="hidden" name="node_id" value=id/>
                {tick_to_confirm("remove it")}
                <button type="submit" class="danger" title="forget this node; leftovers on its engine are no longer collected"
                    data-confirm=question>"Remove"</button>
            </ActionForm>
        }
        .into_any()
    } else {
        view! { <NodeForms id=id name=name.clone() state=state set_state=actions.set_state mark_lost=actions.mark_lost/> }.into_any()
    };
    let reason = (!n.state_reason.is_empty())
        .then(|| view! { <div class="muted small" data-testid="node-reason">{n.state_reason.clone()}</div> });
    let models = if n.gpu_models.is_empty() { "—".to_string() } else { n.gpu_models.join(", ") };
    view! {
        <tr data-testid="node-row" data-name=name.clone() data-state=state.as_str()>
            <td><strong>{name.clone()}</strong></td>
            <td>{n.region.clone()}</td>
            <td>{n.executor.clone()} {simulated} {unenforced}</td>
            <td><code>{endpoint_label(&n.docker_endpoint)}</code></td>
            <td>
                <span class=badge data-testid="node-state">{state.as_str()}</span>
                {reason}
            </td>
            <td class="nowrap">{heartbeat} {stale}</td>
            <td class="nowrap">{capacity_label(n.cpu_count, n.memory_mb)}</td>
            <td>{format!("{} / {}", n.gpu_free, n.gpu_total)}</td>
            <td class="nowrap" data-testid="node-disk">{disk_cell(&n)}</td>
            <td>{models}</td>
            <td>{manage}</td>
        </tr>
    }
}

/// The disk holding the node's engine data: free of total, "below the
/// floor" when it takes no new machine for that; "unknown" where nothing
/// can measure it (a remote engine).
fn disk_cell(n: &NodeSummary) -> impl IntoView {
    use gantry_core::disk::format_bytes;
    let Some(free) = n.disk_free_bytes else {
        return view! { <span class="muted" title="nothing here can measure a remote engine's disk">"unknown"</span> }
            .into_any();
    };
    let total = n.disk_total_bytes.map(|t| format!(" of {}", format_bytes(t))).unwrap_or_default();
    let floor = gantry_platform::disk::nodes::floor_gb();
    let low = gantry_core::disk::below_floor(&n.name, Some(free), floor)
        .map(|why| view! { " " <span class="tag warn" data-testid="node-disk-low" title=why>"below the floor"</span> });
    view! { {format!("{}{total}", format_bytes(free))} {low} }.into_any()
}

/// A live node's two forms: set its state, or mark it lost (a reason and a
/// ticked checkbox, which works without JavaScript too).
#[component]
fn NodeForms(
    id: i64,
    name: String,
    state: NodeState,
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
                    {SETTABLE_STATES.iter().map(|&s| {
                        view! { <option value=s.as_str() selected=state == s>{s.as_str()}</option> }
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
fn AddNodeForm(add: ServerAction<AddNode>, regions: Vec<RegionResources>) -> impl IntoView {
    view! {
        <ActionForm action=add attr:class="stack" attr:data-testid="add-node">
            <p class="muted small">
                "Gantry connects to the node's Docker Engine and saves the node only if the engine answers. "
                "Declare the GPUs the host has; they are shown as declared (simulated), since the host's driver cannot be read from here."
            </p>
            <p class="muted small" data-testid="add-node-simulated-help">
                "For a demo or a test: the endpoint " <code>"simulated://NAME"</code> " (NAME: the node's name) adds a simulated node "
                "in the region chosen, with no engine behind it. Its machines are records only (no containers) and its GPUs are simulated "
                "(empty count: 4; empty model: SIM-A100-80GB)."
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
                    placeholder="unix:///run/docker.sock, tcp://host:2375, tls://host:2376 or simulated://NAME"/>
            </label>
            <div class="row">
                <label>"GPU count" <input type="number" name="gpu_count" min="0" max="64" step="1" value="1"/></label>
                <label>"GPU model" <input type="text" name="gpu_model" maxlength="64" placeholder="e.g. A100-80GB"/></label>
            </div>
            <FormError message=error(add)/>
            {crate::components::flash::answer(add).map(|id| view! {
                <p class="form-ok" role="status" data-testid="node-added">"Node #" {id} " added; it is listed above."</p>
            })}
            <button type="submit" class="primary">"Add node"</button>
        </ActionForm>
    }
}
