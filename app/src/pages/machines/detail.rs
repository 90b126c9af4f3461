//! One dev machine: its facts, the operations it accepts now, and its task
//! history. Rendered on the server from one reading of the machine;
//! `public/live.js` fetches the page again while an operation runs and
//! merges it into what is shown, keeping what the user ticked or typed.
//!
//! Group members see each other's machines, but only the owner or an admin
//! acts on one: the page's data says whether the viewer may (decided on the
//! server by the platform's rule), and the owner's actions are offered only
//! then.

use crate::{
    api::machines::{machine_detail, CancelTask, MachineDetail, MachineOperation},
    components::{
        form_error::{error, FormError},
        poll::busy_when,
        poll::poll,
        status::tag,
        task_table::TaskTable,
    },
    error::AppError,
    model::machines::{accepts, gpu_summary, short_id, task_busy, volume_summary},
    pages::machines::snapshots::{MachineSnapshots, SnapshotCardData},
};
use gantry_core::task::{MachineState, TaskKind};
use gantry_platform::machines::MachineView;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn MachineDetailPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|s| s.parse::<i64>().ok()));
    let op = ServerAction::<MachineOperation>::new();
    let cancel = ServerAction::<CancelTask>::new();
    let detail = Resource::new(id, move |id| async move {
        match id {
            Some(id) => machine_detail(id).await,
            None => Err(AppError::NotFound("machine not found".into())),
        }
    });
    let busy = busy_when(detail, |d| d.machine.state.is_busy() || d.tasks.iter().any(|t| task_busy(t.state)));
    let snapshots = SnapshotCardData::new(id);

    view! {
        {poll(busy)}
        <p class="crumbs"><a href="/machines">"← My machines"</a></p>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || detail.get().map(|d| match d {
                Ok(d) => view! { <MachineView d=d op=op cancel=cancel snapshots=snapshots/> }.into_any(),
                Err(AppError::NotFound(_)) => {
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
            })}
        </Suspense>
        <crate::pages::machines::schedule::MachineSchedule id=Signal::derive(id)/>
        <crate::pages::machines::reclaim::MachineReclaim id=Signal::derive(id)/>
        <crate::pages::machines::disk::MachineDisk id=Signal::derive(id)/>
        <crate::pages::machines::charts::MachineCharts id=Signal::derive(id)/>
        <crate::pages::machines::terminal::MachineWorkspace id=Signal::derive(id)/>
        <crate::pages::machines::ssh::MachineSsh id=Signal::derive(id)/>
    }
}

#[component]
fn MachineView(
    d: MachineDetail,
    op: ServerAction<MachineOperation>,
    cancel: ServerAction<CancelTask>,
    snapshots: SnapshotCardData,
) -> impl IntoView {
    let MachineDetail { machine, tasks, datasets: mounts, can_operate, job, mine, .. } = d;
    let (id, name) = (machine.id, machine.name.clone());
    // A compute task's machine: its owner is told to cancel the task.
    let job = match (job, mine) {
        (false, _) => JobNote::None,
        (true, true) => JobNote::Owner,
        (true, false) => JobNote::Other,
    };
    let datasets = (!mounts.is_empty()).then(|| {
        view! {
            <section class="card" data-testid="machine-datasets">
                <h2>"Datasets (read-only)"</h2>
                <ul>
                    {mounts.into_iter().map(|(name, target)| view! { <li><strong>{name}</strong> " at " <code>{target}</code></li> }).collect_view()}
                </ul>
            </section>
        }
    });
    view! {
        <Title text=name.clone()/>
        <div class="page-head">
            <h1>{name}</h1>
            {crate::pages::machines::power::state_badge(&machine)}
        </div>
        <div class="grid two">
            <MachineFacts m=machine.clone()/>
            <MachineActions m=machine op=op can_operate=can_operate job=job/>
        </div>
        {datasets}
        <section class="card stack">
            <h2>"Task history"</h2>
            <FormError message=error(cancel)/>
            {crate::components::flash::answer(cancel).map(|id| view! {
                <p class="form-ok" role="status" data-testid="cancel-ok">"Task #" {id} " cancelled."</p>
            })}
            <TaskTable tasks=tasks cancel=cancel/>
        </section>
        <MachineSnapshots machine_id=id data=snapshots can_operate=can_operate reinstall=matches!(job, JobNote::None)/>
    }
    .into_any()
}

#[component]
fn MachineFacts(m: MachineView) -> impl IntoView {
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
                <dt>"State"</dt><dd>{m.state_label()}</dd>
                <dt>"Owner"</dt><dd>{format!("{} · group {}", m.owner, m.group_name)}</dd>
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
    m: MachineView,
    op: ServerAction<MachineOperation>,
    /// The viewer may act on the machine (owner or admin): else the
    /// actions are not offered, only who can act.
    can_operate: bool,
    /// A compute task's machine: ended by cancelling its task.
    job: JobNote,
) -> impl IntoView {
    let (id, name, volume, size, owner, state) =
        (m.id, m.name.clone(), m.volume_name.clone(), m.volume_size_gb, m.owner.clone(), m.state);
    let deleted = state == MachineState::Deleted;
    let lost = state == MachineState::Lost;
    let (can_restart, can_reinstall, can_delete) =
        (accepts(state, TaskKind::Restart), accepts(state, TaskKind::Reinstall), accepts(state, TaskKind::Delete));
    // Without JavaScript, the box to tick says what the dialog would.
    let tick_text = match lost {
        true => format!(" I understand this deletes machine {name}"),
        false => format!(
            " I understand this deletes machine {name} and, unless kept, its data volume {}",
            volume_summary(&volume, size)
        ),
    };
    // live.js asks the second question when the form's `keep_volume` is ticked.
    let (question, question_keeping) = match lost {
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
                <button type="submit" disabled=!can_restart>"Restart"</button>
            </ActionForm>
            <ActionForm action=op attr:data-testid="reinstall-machine">
                <input type="hidden" name="machine_id" value=id/>
                <input type="hidden" name="operation" value="reinstall"/>
                <button type="submit" disabled=!can_reinstall>"Reinstall"</button>
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
    let power = matches!(job, JobNote::None).then(|| {
        crate::pages::machines::power::MachinePower(crate::pages::machines::power::MachinePowerProps { m: m.clone() })
    });
    let live = can_operate.then(|| view! {
        {power}
        {relaunch}
        {job_note}
        <ActionForm action=op attr:class="stack danger-zone" attr:data-testid="delete-machine">
            <input type="hidden" name="machine_id" value=id/>
            <input type="hidden" name="operation" value="delete"/>
            // A lost machine's volume was on the lost node: there is nothing to keep.
            <label class="check" hidden=lost>
                <input type="checkbox" name="keep_volume" data-testid="keep-volume"/>
                " Keep the data volume"
            </label>
            <label class="check nojs-only" data-testid="delete-understood"><input type="checkbox" required data-nojs-required=""/>{tick_text}</label>
            <button type="submit" class="danger" disabled=!can_delete data-confirm=question data-confirm-ticked=question_keeping data-confirm-box="keep_volume">"Delete machine"</button>
        </ActionForm>
        {(!(can_restart || can_delete)).then(|| {
            view! { <p class="muted small">"The machine is " {state.as_str()} "; operations are possible once it is running, stopped or failed."</p> }
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
    let lost_note = lost.then(|| {
        let why = if m.message.is_empty() {
            "its node was lost; its GPUs are back in the group's quota".to_string()
        } else {
            m.message.clone()
        };
        view! { <p class="notice" data-testid="machine-lost">{why} ". Deleting the machine closes its record."</p> }
    });
    view! {
        <section class="card stack" data-testid="machine-actions">
            <h2>"Actions"</h2>
            {deleted.then(|| view! {
                <p class="muted">"This machine is deleted; its GPUs are back in the group's quota. Its history stays below."</p>
                <p><a href="/machines">"Back to my machines"</a></p>
            })}
            <div class="stack" hidden=deleted>
                {lost_note}
                {live}
                {owner_only}
            </div>
            <FormError message=error(op)/>
            {crate::components::flash::answer(op).map(|task| view! {
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
