//! The task list shared by the tasks page and a machine's page. A task that
//! has not started has a Cancel button for the person who asked for it
//! (and for admins); the page owns the action, so its result survives the
//! table being redrawn by a poll.

use crate::{
    api::machines::CancelTask,
    components::status::{progress_bar, task_state_badge},
    model::machines::task_cancellable,
    signed_in,
};
use gantry_platform::machines::TaskView;
use leptos::prelude::*;

#[component]
pub fn TaskTable(
    tasks: Vec<TaskView>,
    cancel: ServerAction<CancelTask>,
    #[prop(optional)] show_machine: bool,
) -> impl IntoView {
    if tasks.is_empty() {
        return view! { <p class="muted" data-testid="no-tasks">"No tasks yet."</p> }.into_any();
    }
    let me = signed_in();
    // The server decides; this only hides a button it would refuse.
    let may_cancel = move |t: &TaskView| {
        task_cancellable(t.state) && me.as_ref().is_some_and(|m| m.is_admin() || m.username == t.requester)
    };
    view! {
        <table class="table" data-testid="tasks">
            <thead>
                <tr>
                    <th>"#"</th>
                    <th>"Kind"</th>
                    {show_machine.then(|| view! { <th>"Machine"</th> })}
                    <th>"State"</th>
                    <th>"Progress"</th>
                    <th>"Message"</th>
                    <th>"Attempts"</th>
                    <th>"By"</th>
                    <th>"Created (UTC)"</th>
                    <th><span class="visually-hidden">"Actions"</span></th>
                </tr>
            </thead>
            <tbody>
                {tasks.into_iter().map(|t| {
                    let machine = show_machine.then(|| {
                        let cell = match t.machine_id {
                            Some(id) => view! { <a href=format!("/machines/{id}")>{t.machine_name.clone()}</a> }.into_any(),
                            None => view! { <span>{t.machine_name.clone()}</span> }.into_any(),
                        };
                        view! { <td>{cell}</td> }
                    });
                    let label = format!("Progress of task {}", t.id);
                    let (kind, state, shown) = (t.kind.as_str(), t.state.as_str(), t.shown_kind());
                    let action = may_cancel(&t).then(|| view! {
                        <ActionForm action=cancel attr:class="inline" attr:data-testid="cancel-task">
                            <input type="hidden" name="task_id" value=t.id/>
                            <button type="submit" aria-label=format!("Cancel task {}", t.id)>"Cancel"</button>
                        </ActionForm>
                    });
                    view! {
                        <tr data-testid="task-row" data-id=t.id data-kind=kind data-state=state>
                            <td>{t.id}</td>
                            <td><code>{shown}</code></td>
                            {machine}
                            <td>{task_state_badge(t.state)}</td>
                            <td>{progress_bar(t.progress, label)}</td>
                            <td class="message">{t.message}</td>
                            <td>{t.attempts}</td>
                            <td>{t.requester}</td>
                            <td class="nowrap">{gantry_core::time::format_utc(t.created_at)}</td>
                            <td>{action}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
