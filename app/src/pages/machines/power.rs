//! Stop and Start on a dev machine's page, and how its state reads on the
//! pages. A stopped machine is put away as the idle reclaim puts one away
//! (snapshot kept, container removed, GPUs returned); it reads "shut down"
//! so it is neither taken for an idle reclaim nor for `stopped`, whose
//! container merely exited and still holds its GPUs.

use crate::{
    api::{machines::StopMachine, schedules::StartMachineOrQueue},
    components::form_error::{error, FormError},
    model::machines::accepts,
};
use gantry_core::task::{MachineState, TaskKind};
use gantry_platform::machines::MachineView;
use leptos::prelude::*;

/// The state badge: its words (see [`MachineView::state_label`]), with the
/// machine's message on hover.
pub fn state_badge(m: &MachineView) -> AnyView {
    let class = if m.is_shut_down() { "badge reclaimed shut-down".to_string() } else { format!("badge {}", m.state) };
    view! { <span class=class data-testid="machine-state" title=m.message.clone()>{m.state_label()}</span> }.into_any()
}

/// The Stop and Start forms, for whoever may act on a dev machine (owner
/// or admin). Stop is offered while it runs or its container has
/// stopped; Start once it is shut down.
#[component]
pub fn MachinePower(m: MachineView) -> AnyView {
    let stop = ServerAction::<StopMachine>::new();
    let start = ServerAction::<StartMachineOrQueue>::new();
    let id = m.id;
    let can_stop = accepts(m.state, TaskKind::Reclaim) && !m.is_job();
    let shut_down = m.is_shut_down();
    let stop_form = can_stop.then(|| {
        view! {
            <ActionForm action=stop attr:class="inline" attr:data-testid="stop-machine">
                <input type="hidden" name="machine_id" value=id/>
                <button type="submit">"Stop"</button>
            </ActionForm>
            <p class="muted small">
                "Stop saves the machine's filesystem, removes its container and gives its GPUs back to the group; "
                "its data volume and name stay. Start brings it back (on GPUs free at that time)."
            </p>
        }
        .into_any()
    });
    let start_form = shut_down.then(|| {
        view! {
            <p class="notice" data-testid="machine-shut-down">
                "This machine is shut down: its GPUs are back in the group's quota. "
                "Start asks for them again on its node, where its volume is."
            </p>
            <ActionForm action=start attr:class="inline" attr:data-testid="start-machine">
                <input type="hidden" name="machine_id" value=id/>
                <button type="submit" class="primary">"Start"</button>
                // Without it, a start with no room is refused with the numbers.
                <label class="check">
                    <input type="checkbox" name="queue" value="on" data-testid="start-queue"/>
                    " Start when GPUs are free (wait in the group's line, first come first served)"
                </label>
            </ActionForm>
        }
        .into_any()
    });
    let reclaimed_note = (m.state == MachineState::Reclaimed && !shut_down).then(|| {
        view! { <p class="muted small">"Reclaimed after being idle: restore it from the reclaim card below."</p> }
    });
    view! {
        <div class="stack" data-testid="machine-power">
            {stop_form}
            {start_form}
            {reclaimed_note}
            <FormError message=error(stop).or_else(|| error(start))/>
            // Shown after the start too, when the form is gone.
            {crate::components::flash::answer(start).map(|m| view! { <p class="form-ok" role="status" data-testid="start-answer">{m}</p> })}
        </div>
    }
    .into_any()
}
