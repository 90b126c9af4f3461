//! Snapshots in the portal: taking one from the machine page (and
//! reinstalling the machine from one), and the Snapshots page listing the
//! group's snapshots with delete and "new machine from it". live.js
//! refreshes the page while a snapshot is being taken, keeping what someone
//! types into a row's form with its row.

use crate::{
    api::snapshots::{
        list_snapshots, machine_snapshots, DeleteSnapshot, MachineFromSnapshot, ReinstallFromSnapshot, TakeSnapshot,
    },
    components::{
        confirm::tick_to_confirm,
        form_error::{error, FormError},
        poll::poll,
        poll::{busy_when, Polled},
    },
    model::snapshots::size_text,
};
use gantry_core::snapshot::{SnapshotOrigin, SnapshotState};
use gantry_platform::snapshots::SnapshotView;
use leptos::prelude::*;
use leptos_meta::Title;

fn creating(list: &[SnapshotView]) -> bool {
    list.iter().any(|s| s.state == SnapshotState::Creating)
}

/// The machine page's snapshot list and actions, made at the top of the
/// page: the card sits inside the machine's `<Suspense>`, and a resource
/// made there would be made (and fetched) again on each server render pass.
#[derive(Clone, Copy)]
pub struct SnapshotCardData {
    list: Polled<Vec<SnapshotView>>,
    take: ServerAction<TakeSnapshot>,
    reinstall: ServerAction<ReinstallFromSnapshot>,
}

impl SnapshotCardData {
    pub fn new(machine_id: impl Fn() -> Option<i64> + Send + Sync + 'static) -> Self {
        let take = ServerAction::<TakeSnapshot>::new();
        let reinstall = ServerAction::<ReinstallFromSnapshot>::new();
        let list = Resource::new(machine_id, |id| async move {
            match id {
                Some(id) => machine_snapshots(id).await,
                None => Ok(Vec::new()),
            }
        });
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
    view! {
        <section class="card stack" data-testid="machine-snapshots">
            {poll(busy_when(list, |l| creating(l)))}
            <h2>"Snapshots"</h2>
            <FormError message=error(take).or_else(|| error(reinstall))/>
            {crate::components::flash::answer(take).map(|_| view! { <p class="form-ok" role="status" data-testid="snapshot-taken">"Snapshot requested: it is listed below as it is made."</p> })}
            {crate::components::flash::answer(reinstall).map(|_| view! { <p class="form-ok" role="status">"Reinstalling from the snapshot (data volume kept)."</p> })}
            {can_operate.then(|| view! {
                <ActionForm action=take attr:class="inline">
                    <input type="hidden" name="machine_id" value=machine_id/>
                    <label class="inline-field">"Name " <input type="text" name="name" required maxlength="64" placeholder="before upgrade" autocomplete="off" data-testid="snapshot-name"/></label>
                    " " <button type="submit" data-testid="snapshot-take">"Take snapshot"</button>
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
                                    let ready = s.state == SnapshotState::Ready && can_operate && may_reinstall && s.origin != SnapshotOrigin::Reclaim;
                                    view! {
                                        <tr data-testid="machine-snapshot" data-name=s.name.clone() data-key=format!("snapshot-{}", s.id)>
                                            <td>{s.name.clone()}</td>
                                            <td class="nowrap">{gantry_core::time::format_utc(s.created_at)}</td>
                                            <td>{size_text(s.size_bytes)}</td>
                                            <td>{s.state.as_str()}</td>
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
    let list = Resource::new(|| (), |_| list_snapshots());
    // A page shows the error of the one form that was just posted.
    let refused = error(delete).or_else(|| error(create));
    view! {
        {poll(busy_when(list, |l| creating(l)))}
        <Title text="Snapshots"/>
        <h1>"Snapshots"</h1>
        <section class="card stack" data-testid="snapshots">
            <FormError message=refused/>
            {crate::components::flash::answer(delete).map(|n| view! { <p class="form-ok" role="status" data-testid="snapshot-deleted">"Snapshot " {n} " deleted."</p> })}
            {crate::components::flash::answer(create).map(|id| view! {
                <p class="form-ok" role="status" data-testid="snapshot-machine-created">"Machine created: " <a href=format!("/machines/{id}")>"open it"</a></p>
            })}
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || list.get().map(|r| match r {
                    Ok(rows) if rows.is_empty() => view! { <p class="muted" data-testid="no-snapshots">"No snapshots yet. Take one from a machine's page."</p> }.into_any(),
                    Ok(rows) => view! {
                        <table class="table" data-testid="snapshot-list">
                            <thead><tr><th>"Name"</th><th>"Machine"</th><th>"Taken (UTC)"</th><th>"Size"</th><th>"Origin"</th><th>"State"</th><th>"New machine from it"</th><th></th></tr></thead>
                            <tbody>
                                {rows.into_iter().map(|s| view! { <SnapshotLine s=s delete=delete create=create/> }).collect_view()}
                            </tbody>
                        </table>
                    }
                    .into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Suspense>
        </section>
    }
}

/// One snapshot's row. Rows carry `data-key`, so live.js keeps what someone
/// typed into a row's "new machine from it" inputs with its snapshot when a
/// snapshot is listed above it or one is deleted.
#[component]
fn SnapshotLine(
    s: SnapshotView,
    delete: ServerAction<DeleteSnapshot>,
    create: ServerAction<MachineFromSnapshot>,
) -> impl IntoView {
    let id = s.id;
    // A reclaim snapshot is its machine's restore point: no new machine is
    // made from it (the server refuses).
    let reclaim = s.origin == SnapshotOrigin::Reclaim;
    // Another member's snapshot holds their files: only they (or an admin)
    // make machines from it or delete it; the row says whose it is.
    let mine = crate::signed_in().is_some_and(|me| me.acts_for(s.owner_id));
    let ready = s.state == SnapshotState::Ready && !reclaim && mine;
    let origin = if reclaim { "idle reclaim" } else { "taken by hand" };
    let delete_label = format!("Delete snapshot {}", s.name);
    let question = format!(
        "Delete snapshot {}? Its image is removed from its node for good (machines made from it keep running).",
        s.name
    );
    view! {
        <tr data-testid="snapshot" data-name=s.name.clone() data-key=format!("snapshot-{}", s.id)>
            <td>{s.name.clone()}{s.parent_id.map(|p| view! { <span class="muted small">{format!(" (from snapshot #{p})")}</span> })}</td>
            <td><a href=format!("/machines/{}", s.machine_id)>{s.machine_name.clone()}</a></td>
            <td class="nowrap">{gantry_core::time::format_utc(s.created_at)}</td>
            <td>{size_text(s.size_bytes)}</td>
            <td>{origin}</td>
            <td title=s.message.clone()>{s.state.as_str()}</td>
            <td>{ready.then(|| view! {
                <ActionForm action=create attr:class="inline wrap">
                    <input type="hidden" name="snapshot_id" value=id/>
                    <input type="text" name="name" required placeholder="name" size="10" aria-label="New machine name"/>
                    <input type="number" name="gpu_count" value="1" min="1" max="64" aria-label="GPUs"/>
                    <input type="number" name="volume_size_gb" value="10" min="1" aria-label="Volume GB"/>
                    <button type="submit">"Create"</button>
                </ActionForm>
            })}</td>
            <td>{if mine {
                view! {
                    <ActionForm action=delete attr:class="inline">
                        <input type="hidden" name="snapshot_id" value=id/>
                        {tick_to_confirm("delete it")}
                        <button type="submit" class="danger" aria-label=delete_label data-confirm=question>"Delete"</button>
                    </ActionForm>
                }
                .into_any()
            } else {
                view! { <span class="muted small" data-testid="snapshot-owner">{format!("{}'s", s.owner)}</span> }.into_any()
            }}</td>
        </tr>
    }
}
