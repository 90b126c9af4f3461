//! One dev machine: its facts, the operations it accepts now, and its task
//! history, kept current while an operation runs.
//!
//! The page polls, and a poll must never rebuild what the user is working
//! with: the view is built once per machine, the facts and task history
//! re-render from memos that change only when the data does, and the
//! actions (the "keep the data volume" checkbox above all) are the same
//! elements for the page's life, reading the state through memos.
//!
//! Group members see each other's machines, but only the owner or an admin
//! acts on one: the page's data says whether the viewer may (decided on the
//! server by the platform's rule), and the owner's actions are offered only
//! then. That flag is read once, when the actions are built: it is the
//! viewer's standing, not the machine's state, so polling never rebuilds them.

use crate::{
    api::machines::{machine_detail, CancelTask, MachineOperation},
    components::{
        form_error::{error_text, FormError},
        poll::{poll_guarded, tracked},
        polled::{busy_when, kept_detail, KeptDetail, RefreshFailed},
        stable::{stable, StableShow},
        status::{machine_state_badge, tag},
        task_table::TaskTable,
    },
    error::AppError,
    model::machines::{
        accepts, gpu_summary, machine_busy, short_id, task_busy, volume_summary, MachineDetail, MachineRow,
    },
    pages::machines::snapshots::{MachineSnapshots, SnapshotCardData},
};
use gantry_core::task::{MachineState, TaskKind};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

type Detail = Resource<Result<MachineDetail, AppError>>;

#[component]
pub fn MachineDetailPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|s| s.parse::<i64>().ok()));
    let op = ServerAction::<MachineOperation>::new();
    let cancel = ServerAction::<CancelTask>::new();
    let tick = RwSignal::new(0u64);
    let in_flight = RwSignal::new(false);
    let detail = Resource::new(
        move || (id(), tick.get(), op.version().get(), cancel.version().get()),
        move |(id, _, _, _)| {
            tracked(in_flight, async move {
                match id {
                    Some(id) => machine_detail(id).await,
                    None => Err(AppError::NotFound("machine not found".into())),
                }
            })
        },
    );
    let busy = busy_when(detail, |d| machine_busy(&d.machine.state) || d.tasks.iter().any(|t| task_busy(&t.state)));
    let live = poll_guarded(tick, busy, in_flight);
    // Set once the page is interactive: deletion is then confirmed with a
    // dialog instead of the checkbox a plain HTML form needs.
    let js = RwSignal::new(false);
    Effect::new(move |_| js.set(true));
    let snapshots = SnapshotCardData::new(id);

    view! {
        {live}
        <p class="crumbs"><a href="/machines">"← My machines"</a></p>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            <MachineBody detail=detail op=op cancel=cancel js=js snapshots=snapshots/>
        </Transition>
        <crate::pages::machines::reclaim::MachineReclaim id=Signal::derive(id)/>
        <crate::pages::machines::charts::MachineCharts id=Signal::derive(id)/>
        <crate::pages::machines::terminal::MachineWorkspace id=Signal::derive(id)/>
    }
}

/// Built inside the Transition, so its memos' reads of the resource count
/// for it. The view is rebuilt only when the outcome changes (another
/// machine, or an error), not on every answer.
#[component]
fn MachineBody(
    detail: Detail,
    op: ServerAction<MachineOperation>,
    cancel: ServerAction<CancelTask>,
    js: RwSignal<bool>,
    snapshots: SnapshotCardData,
) -> impl IntoView {
    let KeptDetail { outcome, refresh_failed, data } = kept_detail(detail, |d: &MachineDetail| d.machine.id);
    move || {
        outcome.get().map(|o| match o {
            Ok(_) => view! {
                <RefreshFailed message=refresh_failed/>
                <MachineView data=data op=op cancel=cancel js=js snapshots=snapshots/>
            }
            .into_any(),
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
                }
                .into_any()
            }
            Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
        })
    }
}

#[component]
fn MachineView(
    data: Signal<Option<MachineDetail>>,
    op: ServerAction<MachineOperation>,
    cancel: ServerAction<CancelTask>,
    js: RwSignal<bool>,
    snapshots: SnapshotCardData,
) -> impl IntoView {
    let machine = stable(move |_| data.with(|d| d.as_ref().map(|d| d.machine.clone())));
    let tasks = stable(move |_| data.with(|d| d.as_ref().map(|d| d.tasks.clone()).unwrap_or_default()));
    let mounts = stable(move |_| data.with(|d| d.as_ref().map(|d| d.datasets.clone()).unwrap_or_default()));
    let state = stable(move |_| machine.with(|m| m.as_ref().map(|m| m.state.clone()).unwrap_or_default()));
    let name = machine.with_untracked(|m| m.as_ref().map(|m| m.name.clone()).unwrap_or_default());
    let id = machine.with_untracked(|m| m.as_ref().map(|m| m.id));
    // Who may act does not change while the page polls (see the module doc).
    let can_operate = data.with_untracked(|d| d.as_ref().is_some_and(|d| d.can_operate));
    // A compute task's machine: its owner is told to cancel the task.
    let job =
        data.with_untracked(|d| d.as_ref().map(|d| (d.job, d.mine))).map_or(JobNote::None, |(job, mine)| {
            match (job, mine) {
                (false, _) => JobNote::None,
                (true, true) => JobNote::Owner,
                (true, false) => JobNote::Other,
            }
        });
    view! {
        <Title text=name.clone()/>
        <div class="page-head">
            <h1>{name}</h1>
            {move || machine_state_badge(state.get())}
        </div>
        <div class="grid two">
            {move || machine.get().map(|m| view! { <MachineFacts m=m/> })}
            <MachineActions machine=machine state=state op=op js=js can_operate=can_operate job=job/>
        </div>
        {move || {
            let list = mounts.get();
            (!list.is_empty()).then(|| view! {
                <section class="card" data-testid="machine-datasets">
                    <h2>"Datasets (read-only)"</h2>
                    <ul>
                        {list.into_iter().map(|(name, target)| view! { <li><strong>{name}</strong> " at " <code>{target}</code></li> }).collect_view()}
                    </ul>
                </section>
            })
        }}
        <section class="card stack">
            <h2>"Task history"</h2>
            <FormError message=Signal::derive(move || cancel.value().with(error_text))/>
            {move || crate::components::nojs_done::answer(cancel).map(|id| view! {
                <p class="form-ok" role="status" data-testid="cancel-ok">"Task #" {id} " cancelled."</p>
            })}
            {move || view! { <TaskTable tasks=tasks.get() cancel=cancel/> }}
        </section>
        {id.map(|id| view! { <MachineSnapshots machine_id=id data=snapshots can_operate=can_operate reinstall=matches!(job, JobNote::None)/> })}
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
        {m.simulated.then(|| view! { " " {tag("simulated", "no NVIDIA driver on this node: the GPUs are simulated")} })}
    }
    .into_any();
    let volume = view! {
        {volume_summary(&m.volume_name, m.volume_size_gb)}
        {(!m.volume_enforced).then(|| view! { " " {tag("size not enforced", "a plain Docker volume: the size is not a hard limit on this node")} })}
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

/// What the Delete dialog asks: what goes, what stays, the volume named.
pub fn delete_question(name: &str, volume: &str, size_gb: i64, keep: bool) -> String {
    let volume = volume_summary(volume, size_gb);
    if keep {
        format!("Delete machine {name}? Its container is removed and its GPUs are given back. The data volume {volume} is KEPT: it is listed under kept volumes.")
    } else {
        format!("Delete machine {name}? Its container is removed, its GPUs are given back, and its data volume {volume} is DELETED with everything on it.")
    }
}

/// What the page says of a compute task's machine to whoever cannot act on it.
#[derive(Clone, Copy)]
enum JobNote {
    /// Not a compute task's machine.
    None,
    /// The viewer's own: cancel the task to end it.
    Owner,
    /// A colleague's.
    Other,
}

/// The line a group member sees instead of the owner's actions.
fn owner_only_note(owner: &str) -> String {
    format!("Only its owner ({owner}) or an admin can restart, reinstall, delete or snapshot this machine.")
}

#[component]
fn MachineActions(
    machine: Signal<Option<MachineRow>>,
    state: Signal<String>,
    op: ServerAction<MachineOperation>,
    js: RwSignal<bool>,
    /// The viewer may act on the machine (owner or admin): else the
    /// actions are not offered, only who can act.
    can_operate: bool,
    /// A compute task's machine: ended by cancelling its task.
    job: JobNote,
) -> impl IntoView {
    let (id, name, volume, size, owner) = machine.with_untracked(|m| {
        m.as_ref()
            .map(|m| (m.id, m.name.clone(), m.volume_name.clone(), m.volume_size_gb, m.owner.clone()))
            .unwrap_or_default()
    });
    let deleted = stable(move |_| state.get() == "deleted");
    let lost = stable(move |_| state.get() == MachineState::Lost.as_str());
    let can = move |kind| stable(move |_| accepts(&state.get(), kind));
    let (can_restart, can_reinstall, can_delete) =
        (can(TaskKind::Restart), can(TaskKind::Reinstall), can(TaskKind::Delete));
    let pending = op.pending();
    // The box's state lives here as well as in the element: it survives
    // any redraw, and the dialog names what it decides.
    let keep = RwSignal::new(false);
    // Without JavaScript, the box to tick says what the dialog would.
    let tick_text = {
        let (name, volume) = (name.clone(), volume_summary(&volume, size));
        move || match lost.get() {
            true => format!(" I understand this deletes machine {name}"),
            false => format!(" I understand this deletes machine {name} and, unless kept, its data volume {volume}"),
        }
    };
    // live.js asks the second question when the form's `keep_volume` is ticked.
    let (question, question_keeping) = match lost.get_untracked() {
        true => (delete_question(&name, &volume, size, false), delete_question(&name, &volume, size, false)),
        false => (delete_question(&name, &volume, size, false), delete_question(&name, &volume, size, true)),
    };
    // A compute task's machine is never restarted or reinstalled, an
    // admin's either (its command runs at most once; the server refuses).
    let relaunch = matches!(job, JobNote::None).then(|| view! {
        <div class="actions">
            <ActionForm action=op attr:data-testid="restart-machine">
                <input type="hidden" name="machine_id" value=id/>
                <input type="hidden" name="operation" value="restart"/>
                <button type="submit" disabled=move || !can_restart.get() || pending.get()>"Restart"</button>
            </ActionForm>
            <ActionForm action=op attr:data-testid="reinstall-machine">
                <input type="hidden" name="machine_id" value=id/>
                <input type="hidden" name="operation" value="reinstall"/>
                <button type="submit" disabled=move || !can_reinstall.get() || pending.get()>"Reinstall"</button>
            </ActionForm>
        </div>
        <p class="muted small">"Restart restarts the container; reinstall recreates it from its image and keeps the data volume."</p>
    });
    let job_note = (!matches!(job, JobNote::None)).then(|| view! {
        <p class="muted" data-testid="job-machine-admin">
            "This machine runs " {owner.clone()} "'s compute task, whose command runs at most once: it is not restarted or reinstalled. "
            "Cancel the task on the " <a href="/compute">"Compute"</a> " page, or delete the machine."
        </p>
    });
    let live = can_operate.then(|| view! {
        {relaunch}
        {job_note}
        <ActionForm action=op attr:class="stack danger-zone" attr:data-testid="delete-machine">
            <input type="hidden" name="machine_id" value=id/>
            <input type="hidden" name="operation" value="delete"/>
            // A lost machine's volume was on the lost node: there is nothing to keep.
            <label class="check" hidden=move || lost.get()>
                <input type="checkbox" name="keep_volume" data-testid="keep-volume" prop:checked=keep
                    on:change=move |ev| keep.set(event_target_checked(&ev))/>
                " Keep the data volume"
            </label>
            {move || (!js.get()).then(|| view! {
                <label class="check nojs-only" data-testid="delete-understood"><input type="checkbox" required data-nojs-required=""/>{tick_text.clone()}</label>
            })}
            <button type="submit" class="danger" disabled=move || !can_delete.get() || pending.get() data-confirm=question data-confirm-ticked=question_keeping data-confirm-box="keep_volume">"Delete machine"</button>
        </ActionForm>
        {move || (!(can_restart.get() || can_delete.get())).then(|| {
            view! { <p class="muted small">"The machine is " {state.get()} "; operations are possible once it is running, stopped or failed."</p> }
        })}
    });
    let owner_only = (!can_operate).then(|| match job {
        JobNote::Owner => view! {
            <p class="muted" data-testid="job-machine">
                "This machine runs your compute task and ends with it: to stop it, cancel the task on the "
                <a href="/compute">"Compute"</a>" page."
            </p>
        }
        .into_any(),
        JobNote::Other => view! { <p class="muted" data-testid="job-machine">"This machine runs " {owner.clone()} "'s compute task and ends with it."</p> }.into_any(),
        JobNote::None => view! { <p class="muted" data-testid="owner-only">{owner_only_note(&owner)}</p> }.into_any(),
    });
    let lost_note = move || {
        lost.get().then(|| {
            let why = machine.with(|m| m.as_ref().map(|m| m.message.clone()).unwrap_or_default());
            let why = if why.is_empty() {
                "its node was lost; its GPUs are back in the group's quota".to_string()
            } else {
                why
            };
            view! { <p class="notice" data-testid="machine-lost">{why} ". Deleting the machine closes its record."</p> }
        })
    };
    view! {
        <section class="card stack" data-testid="machine-actions">
            <h2>"Actions"</h2>
            <StableShow when=move || deleted.get()>
                <p class="muted">"This machine is deleted; its GPUs are back in the group's quota. Its history stays below."</p>
                <p><a href="/machines">"Back to my machines"</a></p>
            </StableShow>
            <div class="stack" hidden=move || deleted.get()>
                {lost_note}
                {live}
                {owner_only}
            </div>
            <FormError message=Signal::derive(move || op.value().with(error_text))/>
            {move || crate::components::nojs_done::answer(op).map(|task| view! {
                <p class="form-ok" role="status" data-testid="operation-ok">"Task #" {task} " queued."</p>
            })}
        </section>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::delete_question;

    #[test]
    fn the_delete_dialog_names_the_volume_and_its_fate() {
        let gone = delete_question("m1", "gantry-vol-1", 20, false);
        assert!(gone.contains("gantry-vol-1 · 20 GB") && gone.contains("DELETED"), "{gone}");
        let kept = delete_question("m1", "gantry-vol-1", 20, true);
        assert!(kept.contains("gantry-vol-1 · 20 GB") && kept.contains("KEPT"), "{kept}");
    }
}
