//! The machine page's schedule card: a daily stop, a daily start and a
//! stop after N hours (in the owner's time zone), the next scheduled
//! action, the group's longest run, and — while its start waits for GPUs —
//! its place in the group's line with a Cancel.

use crate::{
    api::schedules::{machine_schedule, CancelQueuedStart, SetMachineSchedule},
    components::form_error::{error, FormError},
    error::AppError,
};
use gantry_platform::schedules::ScheduleView;
use leptos::prelude::*;

#[component]
pub fn MachineSchedule(id: Signal<Option<i64>>) -> impl IntoView {
    let save = ServerAction::<SetMachineSchedule>::new();
    let cancel = ServerAction::<CancelQueuedStart>::new();
    let data = Resource::new(
        move || (id.get(), save.version().get(), cancel.version().get()),
        |(id, _, _)| async move {
            match id {
                Some(id) => machine_schedule(id).await,
                None => Err(AppError::NotFound("machine not found".into())),
            }
        },
    );
    view! {
        <Suspense fallback=|| ()>
            {move || data.get().and_then(Result::ok).map(|s| view! { <ScheduleCard s=s save=save cancel=cancel/> })}
        </Suspense>
    }
}

#[component]
fn ScheduleCard(
    s: ScheduleView,
    save: ServerAction<SetMachineSchedule>,
    cancel: ServerAction<CancelQueuedStart>,
) -> impl IntoView {
    let id = s.machine_id;
    let queued = s.queued.clone().map(|q| {
        let cancel_form = s.can_edit.then(|| {
            view! {
                <ActionForm action=cancel attr:class="inline" attr:data-testid="cancel-queued-start">
                    <input type="hidden" name="machine_id" value=id/>
                    <button type="submit">"Cancel waiting start"</button>
                </ActionForm>
            }
        });
        view! {
            <p class="notice" data-testid="start-queue-place">
                "Waiting for GPUs: " {q.text} ". It starts by itself when room appears. " {cancel_form}
            </p>
        }
    });
    let next = s.next.clone().map(|n| {
        view! { <p data-testid="schedule-next">"Next: " {n.what} " at " {n.local} "."</p> }
    });
    let limit = (s.max_run_hours > 0).then(|| {
        view! {
            <p class="muted small" data-testid="group-max-run">
                {format!(
                    "Group {} lets a machine run at most {} h without a stop: its owner is warned first, then it is stopped (filesystem kept).",
                    s.group_name, s.max_run_hours
                )}
            </p>
        }
    });
    let summary = {
        let mut parts = Vec::new();
        if let Some(t) = &s.stop_at {
            parts.push(format!("stops daily at {t}"));
        }
        if let Some(t) = &s.start_at {
            parts.push(format!("starts daily at {t}"));
        }
        if let Some(h) = s.stop_after_hours {
            parts.push(format!("stops after {h} h running"));
        }
        if parts.is_empty() {
            "No schedule.".to_string()
        } else {
            format!("This machine {} ({}).", parts.join(", "), s.time_zone)
        }
    };
    let form = s.can_edit.then(|| {
        view! {
            <ActionForm action=save attr:class="stack" attr:data-testid="schedule-form">
                <input type="hidden" name="machine_id" value=id/>
                <div class="row">
                    <label>"Stop daily at " <input type="time" name="stop_at" value=s.stop_at.clone().unwrap_or_default() data-testid="schedule-stop-at"/></label>
                    <label>"Start daily at " <input type="time" name="start_at" value=s.start_at.clone().unwrap_or_default() data-testid="schedule-start-at"/></label>
                    <label>"Stop after (hours running) "
                        <input type="number" min="0" max="8760" step="1" name="stop_after_hours"
                            value=s.stop_after_hours.map(|h| h.to_string()).unwrap_or_default() data-testid="schedule-hours"/>
                    </label>
                </div>
                <p class="muted small">
                    "Times are in the owner's time zone, " {s.time_zone.clone()} " (set on the "
                    <a href="/account/password">"account page"</a> "). Empty fields clear; a start that finds no room waits for GPUs."
                </p>
                <button type="submit">"Save schedule"</button>
            </ActionForm>
        }
    });
    view! {
        <section class="card stack" data-testid="machine-schedule">
            <h2>"Schedule"</h2>
            {queued}
            <p data-testid="schedule-summary">{summary}</p>
            {next}
            {limit}
            {form}
            <FormError message=error(save).or_else(|| error(cancel))/>
        </section>
    }
}
