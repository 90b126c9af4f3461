//! One dev machine: its facts, the operations it accepts now, and its task
//! history, kept current while an operation runs.

use crate::{
    api::machines::{machine_detail, CancelTask, MachineOperation},
    components::{
        form_error::{error_text, FormError},
        poll::poll,
        status::{MachineBadge, Tag},
        task_table::TaskTable,
    },
    error::AppError,
    model::machines::{accepts, gpu_summary, machine_busy, short_id, task_busy, volume_summary, MachineDetail, MachineRow},
};
use gantry_core::task::{MachineState, TaskKind};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn MachineDetailPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|s| s.parse::<i64>().ok()));
    let op = ServerAction::<MachineOperation>::new();
    let cancel = ServerAction::<CancelTask>::new();
    let tick = RwSignal::new(0u64);
    let detail = Resource::new(
        move || (id(), tick.get(), op.version().get(), cancel.version().get()),
        |(id, _, _, _)| async move {
            match id {
                Some(id) => machine_detail(id).await,
                None => Err(AppError::NotFound("machine not found".into())),
            }
        },
    );
    let busy = Signal::derive(move || {
        detail.with(|d| {
            d.as_ref().and_then(|r| r.as_ref().ok()).is_some_and(|d| machine_busy(&d.machine.state) || d.tasks.iter().any(|t| task_busy(&t.state)))
        })
    });
    poll(tick, busy);
    // Set once the page is interactive: deletion is then confirmed with a
    // dialog instead of the checkbox a plain HTML form needs.
    let js = RwSignal::new(false);
    Effect::new(move |_| js.set(true));

    view! {
        <p class="crumbs"><a href="/machines">"← My machines"</a></p>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || detail.get().map(|r| match r {
                Ok(d) => view! { <MachineView detail=d op=op cancel=cancel js=js/> }.into_any(),
                Err(AppError::NotFound(_)) => {
                    #[cfg(feature = "ssr")]
                    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
                        resp.set_status(http::StatusCode::NOT_FOUND);
                    }
                    view! {
                        <Title text="Machine not found"/>
                        <section class="card empty" data-testid="machine-not-found">
                            <h1>"Machine not found"</h1>
                            <p class="muted">"There is no such machine, or it belongs to another group."</p>
                        </section>
                    }.into_any()
                }
                Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
            })}
        </Transition>
        <crate::pages::machines::reclaim::MachineReclaim id=Signal::derive(id)/>
        <crate::pages::machines::terminal::MachineWorkspace id=Signal::derive(id)/>
    }
}

#[component]
fn MachineView(detail: MachineDetail, op: ServerAction<MachineOperation>, cancel: ServerAction<CancelTask>, js: RwSignal<bool>) -> impl IntoView {
    let MachineDetail { machine: m, tasks } = detail;
    view! {
        <Title text=m.name.clone()/>
        <div class="page-head">
            <h1>{m.name.clone()}</h1>
            <MachineBadge state=m.state.clone()/>
        </div>
        <div class="grid two">
            <MachineFacts m=m.clone()/>
            <MachineActions m=m op=op js=js/>
        </div>
        <section class="card stack">
            <h2>"Task history"</h2>
            <FormError message=Signal::derive(move || cancel.value().with(error_text))/>
            <TaskTable tasks=tasks cancel=cancel/>
        </section>
    }
    .into_any()
}

#[component]
fn MachineFacts(m: MachineRow) -> impl IntoView {
    let container = match m.container_id.clone() {
        Some(c) => view! { <code data-testid="machine-container" title=c.clone()>{short_id(&c)}</code> }.into_any(),
        None => view! { <span>"—"</span> }.into_any(),
    };
    let gpus = view! {
        <span data-testid="machine-gpus">{gpu_summary(m.gpu_count, &m.gpu_model, &m.gpu_indexes)}</span>
        {m.simulated.then(|| view! { " " <Tag text="simulated" title="no NVIDIA driver on this node: the GPUs are simulated"/> })}
    }
    .into_any();
    let volume = view! {
        {volume_summary(&m.volume_name, m.volume_size_gb)}
        {(!m.volume_enforced).then(|| view! { " " <Tag text="size not enforced" title="a plain Docker volume: the size is not a hard limit on this node"/> })}
    }
    .into_any();
    let message = if m.message.is_empty() { "—".to_string() } else { m.message.clone() };
    view! {
        <section class="card">
            <h2>"Details"</h2>
            <dl class="facts" data-testid="machine-facts">
                <dt>"State"</dt><dd>{m.state.clone()}</dd>
                <dt>"Owner"</dt><dd>{format!("{} · group {}", m.owner, m.group)}</dd>
                <dt>"Node"</dt><dd data-testid="machine-node">{m.node.clone().unwrap_or_else(|| "—".into())}</dd>
                <dt>"GPUs"</dt><dd>{gpus}</dd>
                <dt>"Volume"</dt><dd>{volume}</dd>
                <dt>"Image"</dt><dd>{m.image.clone()}</dd>
                <dt>"Container"</dt><dd>{container}</dd>
                <dt>"Exit code"</dt><dd>{m.exit_code.map(|c| c.to_string()).unwrap_or_else(|| "—".into())}</dd>
                <dt>"Message"</dt><dd data-testid="machine-message">{message}</dd>
                <dt>"Created (UTC)"</dt><dd>{gantry_core::time::format_utc(m.created_at)}</dd>
                <dt>"Updated (UTC)"</dt><dd>{gantry_core::time::format_utc(m.updated_at)}</dd>
            </dl>
        </section>
    }
    .into_any()
}

#[component]
fn MachineActions(m: MachineRow, op: ServerAction<MachineOperation>, js: RwSignal<bool>) -> impl IntoView {
    if m.state == "deleted" {
        return view! {
            <section class="card stack" data-testid="machine-actions">
                <h2>"Actions"</h2>
                <p class="muted">"This machine is deleted; its GPUs are back in the group's quota. Its history stays below."</p>
                <p><a href="/machines">"Back to my machines"</a></p>
            </section>
        }
        .into_any();
    }
    let lost = m.state == MachineState::Lost.as_str();
    let can = |kind| accepts(&m.state, kind);
    let (can_restart, can_reinstall, can_delete) = (can(TaskKind::Restart), can(TaskKind::Reinstall), can(TaskKind::Delete));
    let pending = op.pending();
    let name = m.name.clone();
    let confirm_delete = move |ev: leptos::ev::MouseEvent| {
        let question = format!("Delete machine {name}? Its container is removed and its GPUs are given back.");
        if !window().confirm_with_message(&question).unwrap_or(false) {
            ev.prevent_default();
        }
    };
    let simple = view! {
        <div class="actions">
            <ActionForm action=op attr:data-testid="restart-machine">
                <input type="hidden" name="machine_id" value=m.id/>
                <input type="hidden" name="operation" value="restart"/>
                <button type="submit" disabled=move || !can_restart || pending.get()>"Restart"</button>
            </ActionForm>
            <ActionForm action=op attr:data-testid="reinstall-machine">
                <input type="hidden" name="machine_id" value=m.id/>
                <input type="hidden" name="operation" value="reinstall"/>
                <button type="submit" disabled=move || !can_reinstall || pending.get()>"Reinstall"</button>
            </ActionForm>
        </div>
    }
    .into_any();
    // A lost machine's volume was on the lost node: there is nothing to keep.
    let keep = (!lost).then(|| view! { <label class="check"><input type="checkbox" name="keep_volume"/>" Keep the data volume"</label> });
    let delete = view! {
        <ActionForm action=op attr:class="stack danger-zone" attr:data-testid="delete-machine">
            <input type="hidden" name="machine_id" value=m.id/>
            <input type="hidden" name="operation" value="delete"/>
            {keep}
            {move || (!js.get()).then(|| view! {
                <label class="check"><input type="checkbox" required/>" I understand this deletes the machine"</label>
            })}
            <button type="submit" class="danger" disabled=move || !can_delete || pending.get() on:click=confirm_delete>"Delete machine"</button>
        </ActionForm>
    }
    .into_any();
    let blocked = (!(can_restart || can_delete)).then(|| {
        view! { <p class="muted small">"The machine is " {m.state.clone()} "; operations are possible once it is running, stopped or failed."</p> }
    });
    let lost_note = lost.then(|| {
        let why = if m.message.is_empty() { "its node was lost; its GPUs are back in the group's quota".to_string() } else { m.message.clone() };
        view! { <p class="notice" data-testid="machine-lost">{why} ". Deleting the machine closes its record."</p> }
    });
    view! {
        <section class="card stack" data-testid="machine-actions">
            <h2>"Actions"</h2>
            {lost_note}
            {simple}
            <p class="muted small">"Restart restarts the container; reinstall recreates it from its image and keeps the data volume."</p>
            {delete}
            {blocked}
            <FormError message=Signal::derive(move || op.value().with(error_text))/>
            {move || op.value().get().and_then(Result::ok).map(|task| view! {
                <p class="form-ok" role="status" data-testid="operation-ok">"Task #" {task} " queued."</p>
            })}
        </section>
    }
    .into_any()
}
