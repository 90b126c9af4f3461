//! Snapshots in the portal: taking one from the machine page (and
//! reinstalling the machine from one), and the Snapshots page listing the
//! group's snapshots with delete and "new machine from it". The page polls
//! while a snapshot is being taken; its rows are kept between polls, so
//! what someone types into a row's form survives.

use crate::{
    api::snapshots::{
        list_snapshots, machine_snapshots, DeleteSnapshot, MachineFromSnapshot, ReinstallFromSnapshot, TakeSnapshot,
    },
    components::{
        confirm::tick_to_confirm,
        form_error::{error_text, FormError},
        poll::poll,
        polled::{busy_when, Polled},
        stable::stable,
    },
    error::AppError,
    model::snapshots::{size_text, SnapshotRow},
};
use leptos::prelude::*;
use leptos_meta::Title;

fn creating(list: &[SnapshotRow]) -> bool {
    list.iter().any(|s| s.state == "creating")
}

/// The machine page's snapshot list and actions, made at the top of the
/// page: the card sits inside the machine's `<Transition>`, and a resource
/// made there would be made (and fetched) again on each server render pass.
#[derive(Clone, Copy)]
pub struct SnapshotCardData {
    list: Polled<Vec<SnapshotRow>>,
    take: ServerAction<TakeSnapshot>,
    reinstall: ServerAction<ReinstallFromSnapshot>,
}

impl SnapshotCardData {
    pub fn new(machine_id: impl Fn() -> Option<i64> + Send + Sync + 'static) -> Self {
        let take = ServerAction::<TakeSnapshot>::new();
        let reinstall = ServerAction::<ReinstallFromSnapshot>::new();
        let tick = RwSignal::new(0u64);
        let list = Resource::new(
            move || (machine_id(), tick.get(), take.version().get(), reinstall.version().get()),
            |(id, ..)| async move {
                match id {
                    Some(id) => machine_snapshots(id).await,
                    None => Ok(Vec::new()),
                }
            },
        );
        Self { list, take, reinstall }
    }
}

/// The machine page's snapshot card. Taking a snapshot and reinstalling
/// from one are for the machine's owner or an admin (`can_operate`, from
/// the server); a group member sees the list only. `reinstall`: false for a
/// compute task's machine, which is never reinstalled (the server refuses).
#[component]
pub fn MachineSnapshots(machine_id: i64, data: SnapshotCardData, can_operate: bool, reinstall: bool) -> impl IntoView {
    let may_reinstall = reinstall;
    let SnapshotCardData { list, take, reinstall } = data;
    let taking = take.pending();
    view! {
        <section class="card stack" data-testid="machine-snapshots">
            {poll(RwSignal::new(0), busy_when(list, |l| creating(l)))}
            <h2>"Snapshots"</h2>
            <FormError message=Signal::derive(move || take.value().with(error_text).or_else(|| reinstall.value().with(error_text)))/>
            {move || crate::components::nojs_done::answer(take).map(|_| view! { <p class="form-ok" role="status" data-testid="snapshot-taken">"Snapshot requested: it is listed below as it is made."</p> })}
            {move || crate::components::nojs_done::answer(reinstall).map(|_| view! { <p class="form-ok" role="status">"Reinstalling from the snapshot (data volume kept)."</p> })}
            {can_operate.then(|| view! {
                <ActionForm action=take attr:class="inline">
                    <input type="hidden" name="machine_id" value=machine_id/>
                    <label>"Name " <input type="text" name="name" required maxlength="64" placeholder="before upgrade" data-testid="snapshot-name"/></label>
                    " " <button type="submit" data-testid="snapshot-take" disabled=move || taking.get()>"Take snapshot"</button>
                </ActionForm>
            })}
            <p class="muted small">"A snapshot keeps the machine's files outside /data (installed software, settings); the data volume is not part of it."</p>
            <Transition fallback=|| ()>
                {move || list.get().and_then(Result::ok).map(|mine| {
                    (!mine.is_empty()).then(|| view! {
                        <table class="table" data-testid="machine-snapshot-list">
                            <thead><tr><th>"Name"</th><th>"Taken (UTC)"</th><th>"Size"</th><th>"State"</th><th></th></tr></thead>
                            <tbody>
                                {mine.into_iter().map(|s| {
                                    // A reclaim snapshot is the machine's restore point,
                                    // not something to reinstall from (the server refuses).
                                    let ready = s.state == "ready" && can_operate && may_reinstall && s.origin != "reclaim";
                                    view! {
                                        <tr data-testid="machine-snapshot" data-name=s.name.clone() data-key=format!("snapshot-{}", s.id)>
                                            <td>{s.name.clone()}</td>
                                            <td class="nowrap">{gantry_core::time::format_utc(s.created_at)}</td>
                                            <td>{size_text(s.size_bytes)}</td>
                                            <td>{s.state.clone()}</td>
                                            <td>{ready.then(|| view! {
                                                <ActionForm action=reinstall attr:class="inline">
                                                    <input type="hidden" name="machine_id" value=machine_id/>
                                                    <input type="hidden" name="snapshot_id" value=s.id/>
                                                    <button type="submit">"Reinstall from it"</button>
                                                </ActionForm>
                                            })}</td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    })
                })}
            </Transition>
        </section>
    }
}

/// `/snapshots`: the group's snapshots (an admin's: all).
#[component]
pub fn SnapshotsPage() -> impl IntoView {
    let delete = ServerAction::<DeleteSnapshot>::new();
    let create = ServerAction::<MachineFromSnapshot>::new();
    let tick = RwSignal::new(0u64);
    let list =
        Resource::new(move || (tick.get(), delete.version().get(), create.version().get()), |_| list_snapshots());
    let live = poll(tick, busy_when(list, |l| creating(l)));
    // The error of whichever action answered last: an old refusal of a
    // delete must not hide (or pose as) a new one of a create.
    let latest = RwSignal::new(None::<bool>);
    Effect::new(move |_| {
        if delete.value().with(Option::is_some) {
            latest.set(Some(true))
        }
    });
    Effect::new(move |_| {
        if create.value().with(Option::is_some) {
            latest.set(Some(false))
        }
    });
    let error = Signal::derive(move || match latest.get() {
        Some(true) => delete.value().with(error_text),
        Some(false) => create.value().with(error_text),
        None => delete.value().with(error_text).or_else(|| create.value().with(error_text)),
    });
    view! {
        {live}
        <Title text="Snapshots"/>
        <h1>"Snapshots"</h1>
        <section class="card stack" data-testid="snapshots">
            <FormError message=error/>
            {move || crate::components::nojs_done::answer(delete).map(|n| view! { <p class="form-ok" role="status" data-testid="snapshot-deleted">"Snapshot " {n} " deleted."</p> })}
            {move || crate::components::nojs_done::answer(create).map(|id| view! {
                <p class="form-ok" role="status" data-testid="snapshot-machine-created">"Machine created: " <a href=format!("/machines/{id}")>"open it"</a></p>
            })}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                <SnapshotTable list=list delete=delete create=create/>
            </Transition>
        </section>
    }
}

/// Built inside the Transition, so its memos' reads of the resource count
/// for it. The rows are keyed by snapshot id and built once each: a poll
/// updates a row's size and state in place, and a snapshot listed above
/// (newest first) or one deleted never moves what someone typed into a
/// row's "new machine from it" inputs to another snapshot's row. While a
/// refetch runs, or after one fails, the rows stay as they were.
#[component]
fn SnapshotTable(
    list: Polled<Vec<SnapshotRow>>,
    delete: ServerAction<DeleteSnapshot>,
    create: ServerAction<MachineFromSnapshot>,
) -> impl IntoView {
    let ids = stable(move |prev: Option<&Option<Result<Vec<i64>, AppError>>>| {
        let now = list.with(|r| {
            r.as_ref().map(|r| r.as_ref().map(|l| l.iter().map(|s| s.id).collect::<Vec<_>>()).map_err(Clone::clone))
        });
        match (now, prev.cloned().flatten()) {
            (None, last) | (Some(Err(_)), last @ Some(Ok(_))) => last,
            (now, _) => now,
        }
    });
    // What is shown: nothing yet, "none", the table, or the error.
    let shown =
        stable(move |_| ids.with(|i| i.as_ref().map(|r| r.as_ref().map(Vec::is_empty).map_err(ToString::to_string))));
    move || {
        shown.get().map(|s| match s {
        Ok(true) => view! { <p class="muted" data-testid="no-snapshots">"No snapshots yet. Take one from a machine's page."</p> }.into_any(),
        Ok(false) => view! {
            <table class="table" data-testid="snapshot-list">
                <thead><tr><th>"Name"</th><th>"Machine"</th><th>"Taken (UTC)"</th><th>"Size"</th><th>"Origin"</th><th>"State"</th><th>"New machine from it"</th><th></th></tr></thead>
                <tbody>
                    <For each=move || ids.get().and_then(Result::ok).unwrap_or_default() key=|id| *id let:id>
                        <SnapshotLine id=id list=list delete=delete create=create/>
                    </For>
                </tbody>
            </table>
        }
        .into_any(),
        Err(e) => view! { <p class="form-error">{e}</p> }.into_any(),
    })
    }
}

#[component]
fn SnapshotLine(
    id: i64,
    list: Polled<Vec<SnapshotRow>>,
    delete: ServerAction<DeleteSnapshot>,
    create: ServerAction<MachineFromSnapshot>,
) -> impl IntoView {
    // The row's latest data; a snapshot missing from one answer keeps its last.
    let row = stable(move |prev: Option<&Option<SnapshotRow>>| {
        let latest = list
            .with(|r| r.as_ref().and_then(|r| r.as_ref().ok()).and_then(|l| l.iter().find(|s| s.id == id).cloned()));
        latest.or_else(|| prev.cloned().flatten())
    });
    let Some(s) = row.get_untracked() else { return ().into_any() };
    let state = stable(move |_| row.with(|r| r.as_ref().map(|r| r.state.clone()).unwrap_or_default()));
    // A reclaim snapshot is its machine's restore point: no new machine is
    // made from it (the server refuses).
    let reclaim = s.origin == "reclaim";
    // Another member's snapshot holds their files: only they (or an admin)
    // make machines from it or delete it; the row says whose it is.
    let mine = s.mine;
    let ready = stable(move |_| state.get() == "ready" && !reclaim && mine);
    let origin = if reclaim { "idle reclaim" } else { "taken by hand" };
    let delete_label = format!("Delete snapshot {}", s.name);
    let question = format!(
        "Delete snapshot {}? Its image is removed from its node for good (machines made from it keep running).",
        s.name
    );
    let (creating, deleting) = (create.pending(), delete.pending());
    view! {
        <tr data-testid="snapshot" data-name=s.name.clone() data-key=format!("snapshot-{}", s.id)>
            <td>{s.name.clone()}{s.parent_id.map(|p| view! { <span class="muted small">{format!(" (from snapshot #{p})")}</span> })}</td>
            <td><a href=format!("/machines/{}", s.machine_id)>{s.machine_name.clone()}</a></td>
            <td class="nowrap">{gantry_core::time::format_utc(s.created_at)}</td>
            <td>{move || row.with(|r| r.as_ref().map(|r| size_text(r.size_bytes)))}</td>
            <td>{origin}</td>
            <td title=move || row.with(|r| r.as_ref().map(|r| r.message.clone()).unwrap_or_default())>{move || state.get()}</td>
            <td>{move || ready.get().then(|| view! {
                <ActionForm action=create attr:class="inline wrap">
                    <input type="hidden" name="snapshot_id" value=id/>
                    <input type="text" name="name" required placeholder="name" size="10" aria-label="New machine name"/>
                    <input type="number" name="gpu_count" value="1" min="1" max="64" aria-label="GPUs"/>
                    <input type="number" name="volume_size_gb" value="10" min="1" aria-label="Volume GB"/>
                    <button type="submit" disabled=move || creating.get()>"Create"</button>
                </ActionForm>
            })}</td>
            <td>{if mine {
                view! {
                    <ActionForm action=delete attr:class="inline">
                        <input type="hidden" name="snapshot_id" value=id/>
                        {tick_to_confirm("delete it")}
                        <button type="submit" class="danger" aria-label=delete_label disabled=move || deleting.get() data-confirm=question>"Delete"</button>
                    </ActionForm>
                }
                .into_any()
            } else {
                view! { <span class="muted small" data-testid="snapshot-owner">{format!("{}'s", s.owner)}</span> }.into_any()
            }}</td>
        </tr>
    }
    .into_any()
}
