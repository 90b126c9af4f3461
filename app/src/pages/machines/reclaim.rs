//! Idle reclaim in the portal: the banner on the dashboard and machines
//! pages (a warned machine with the time left and Extend; a reclaimed one
//! with Restore), and the machine page's card (the same, the rebalance
//! opt-out, the machine's events and its snapshots).

use crate::{
    api::reclaim::{machine_reclaim, reclaim_notices, ExtendReclaim, RebalanceOptOut, RestoreMachine},
    components::{
        form_error::{error, FormError},
        poll::poll,
    },
    error::AppError,
    model::reclaim::event_label,
};
use gantry_core::task::MachineState;
use gantry_platform::reclaim::{MachineEvent, ReclaimStatus};
use leptos::prelude::*;

/// Whether the signed-in viewer may extend, restore and opt out (the owner
/// or an admin).
fn mine(n: &ReclaimStatus) -> bool {
    crate::signed_in().is_some_and(|me| me.acts_for(n.owner_id))
}

/// Whether the signed-in viewer may push the deadline back now.
fn can_extend(n: &ReclaimStatus) -> bool {
    crate::signed_in().is_some_and(|me| n.can_extend(&me))
}

/// "reclaimed in 4 min 10 s (at 2026-11-30 10:20 UTC) unless its GPUs are
/// used", at `now` (unix s); `can_extend`: the viewer may extend it.
fn warning_text(n: &ReclaimStatus, now: i64, can_extend: bool) -> String {
    match (n.deadline, n.seconds_left(now)) {
        (Some(at), Some(left)) => format!(
            "Idle: machine {} will be snapshotted and its GPUs returned in {} (at {} UTC) unless its GPUs are used{}.",
            n.machine_name,
            gantry_core::reclaim::format_left(left),
            gantry_core::time::format_utc(at),
            if can_extend { " or you extend it" } else { "" }
        ),
        _ => String::new(),
    }
}

/// Forms shared by the banner and the machine card: Extend for a warned
/// machine, Restore for a reclaimed one.
#[component]
fn NoticeActions(
    n: ReclaimStatus,
    extend: ServerAction<ExtendReclaim>,
    restore: ServerAction<RestoreMachine>,
) -> impl IntoView {
    let id = n.machine_id;
    let extend_form = can_extend(&n).then(|| {
        let left = n.extensions_allowed - n.extensions_used;
        view! {
            <ActionForm action=extend attr:class="inline">
                <input type="hidden" name="machine_id" value=id/>
                <button type="submit" data-testid="reclaim-extend">{format!("Extend ({left} left)")}</button>
            </ActionForm>
        }
    });
    let restore_form = (n.restorable() && mine(&n)).then(|| {
        view! {
            <ActionForm action=restore attr:class="inline">
                <input type="hidden" name="machine_id" value=id/>
                <button type="submit" class="primary" data-testid="reclaim-restore">"Restore"</button>
            </ActionForm>
        }
    });
    view! { {extend_form} {restore_form} }
}

fn notice_text(n: &ReclaimStatus) -> String {
    if n.state == MachineState::Reclaimed {
        format!("Machine {} was reclaimed after being idle: its files were snapshotted and its GPUs returned. Restore brings it back with its data volume.", n.machine_name)
    } else {
        warning_text(n, gantry_platform::now(), can_extend(n))
    }
}

/// The portal's banner: every warned or reclaimed machine of the group.
#[component]
pub fn ReclaimBanner() -> impl IntoView {
    let extend = ServerAction::<ExtendReclaim>::new();
    let restore = ServerAction::<RestoreMachine>::new();
    let notices = Resource::new(|| (), |_| reclaim_notices());
    view! {
        {poll(Signal::stored(false))}
        <Transition fallback=|| ()>
            {move || notices.get().and_then(Result::ok).filter(|l| !l.is_empty()).map(|list| view! {
                <section class="card reclaim-banner stack" data-testid="reclaim-banner" role="status">
                    <FormError message=error(extend).or_else(|| error(restore))/>
                    {list.into_iter().map(|n| {
                        let href = format!("/machines/{}", n.machine_id);
                        let (machine, state, text) = (n.machine_name.clone(), n.state.as_str(), notice_text(&n));
                        view! {
                            <p class="reclaim-notice" data-testid="reclaim-notice" data-machine=machine data-state=state>
                                <a href=href>{text}</a> " "
                                <NoticeActions n=n extend=extend restore=restore/>
                            </p>
                        }
                    }).collect_view()}
                </section>
            })}
        </Transition>
    }
}

/// The machine page's card.
#[component]
pub fn MachineReclaim(id: Signal<Option<i64>>) -> impl IntoView {
    let extend = ServerAction::<ExtendReclaim>::new();
    let restore = ServerAction::<RestoreMachine>::new();
    let opt = ServerAction::<RebalanceOptOut>::new();
    let data = Resource::new(
        move || id.get(),
        |id| async move {
            match id {
                Some(id) => machine_reclaim(id).await,
                // The page itself says the machine is not found.
                None => Err(AppError::NotFound("machine not found".into())),
            }
        },
    );
    view! {
        <Suspense fallback=|| ()>
            {move || data.get().and_then(Result::ok).map(|(n, events)| view! {
                <ReclaimCard n=n events=events extend=extend restore=restore opt=opt/>
            })}
        </Suspense>
    }
}

/// The card of a machine's reclaim standing and its events.
#[component]
fn ReclaimCard(
    n: ReclaimStatus,
    events: Vec<MachineEvent>,
    extend: ServerAction<ExtendReclaim>,
    restore: ServerAction<RestoreMachine>,
    opt: ServerAction<RebalanceOptOut>,
) -> impl IntoView {
    let text = notice_text(&n);
    let shown = n.warned() || n.reclaimed();
    let opted = n.rebalance_opt_out;
    let machine_id = n.machine_id;
    view! {
        <section class="card stack" data-testid="machine-reclaim">
            <h2>"Idle reclaim and GPU placement"</h2>
            <FormError message=error(extend).or_else(|| error(restore))/>
            {crate::components::flash::answer(extend).map(|m| view! { <p class="form-ok" role="status" data-testid="reclaim-extended">{m}</p> })}
            {shown.then(|| view! {
                <p class="reclaim-notice" data-testid="machine-reclaim-notice">{text}" " <NoticeActions n=n.clone() extend=extend restore=restore/></p>
            })}
            {n.exempt.then(|| view! { <p class="muted">"This machine is exempt from idle reclaim."</p> })}
            // The owner's (or an admin's) to change; a group member is told the setting.
            {if mine(&n) {
                view! {
                    <ActionForm action=opt attr:class="inline">
                        <input type="hidden" name="machine_id" value=machine_id/>
                        <label class="check"><input type="checkbox" name="opt_out" checked=opted data-testid="rebalance-opt-out"/>
                            " Keep this machine on its GPUs (no hot-GPU rebalancing)"</label>
                        " " <button type="submit">"Save"</button>
                    </ActionForm>
                }
                .into_any()
            } else {
                let placement = if opted { "kept on its GPUs (no hot-GPU rebalancing)" } else { "may be moved off hot GPUs" };
                view! { <p class="muted small" data-testid="rebalance-setting">"This machine " {placement} "."</p> }.into_any()
            }}
            {(!events.is_empty()).then(|| view! {
                <table class="table" data-testid="machine-events">
                    <thead><tr><th>"When (UTC)"</th><th>"Event"</th><th>"Details"</th></tr></thead>
                    <tbody>
                        {events.into_iter().map(|e| view! {
                            <tr data-testid="machine-event" data-kind=e.kind.as_str()>
                                <td class="nowrap">{gantry_core::time::format_utc(e.at_ms.div_euclid(1000))}</td>
                                <td>{event_label(e.kind)}</td>
                                <td>{e.detail.clone()}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            })}
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_says_the_time_left_and_whether_it_can_be_extended() {
        let owner = gantry_platform::accounts::User {
            id: 7,
            username: "alice".into(),
            role: gantry_core::Role::User,
            group_id: 1,
            group_name: "default".into(),
            group_quota: gantry_platform::accounts::GroupQuota {
                gpu_quota: 4,
                gpus_in_use: 1,
                max_gpus_per_machine: 4,
            },
            disabled: false,
            must_change_password: false,
            session_gen: 0,
            reclaim_notices: true,
        };
        let n = ReclaimStatus {
            machine_id: 1,
            machine_name: "box".into(),
            owner_id: owner.id,
            state: MachineState::Running,
            deadline: Some(1_795_945_380),
            extensions_used: 0,
            extensions_allowed: 1,
            exempt: false,
            rebalance_opt_out: false,
            restore_snapshot_id: None,
            shut_down: false,
        };
        let now = 1_795_945_380 - 250;
        assert_eq!(warning_text(&n, now, n.can_extend(&owner)), "Idle: machine box will be snapshotted and its GPUs returned in 4 min 10 s (at 2026-11-29 09:43 UTC) unless its GPUs are used or you extend it.");
        let used = ReclaimStatus { extensions_used: 1, ..n };
        assert!(!used.can_extend(&owner) && !warning_text(&used, now, used.can_extend(&owner)).contains("extend"));
    }
}
