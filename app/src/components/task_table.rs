//! The task list shared by the tasks page and a machine's page.

use crate::{
    components::status::{Progress, TaskBadge},
    model::machines::TaskRow,
};
use leptos::prelude::*;

#[component]
pub fn TaskTable(tasks: Vec<TaskRow>, #[prop(optional)] show_machine: bool) -> impl IntoView {
    if tasks.is_empty() {
        return view! { <p class="muted" data-testid="no-tasks">"No tasks yet."</p> }.into_any();
    }
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
                    let (kind, state) = (t.kind.clone(), t.state.clone());
                    view! {
                        <tr data-testid="task-row" data-id=t.id data-kind=kind data-state=state>
                            <td>{t.id}</td>
                            <td><code>{t.kind}</code></td>
                            {machine}
                            <td><TaskBadge state=t.state/></td>
                            <td><Progress value=t.progress label=label/></td>
                            <td class="message">{t.message}</td>
                            <td>{t.attempts}</td>
                            <td>{t.requester}</td>
                            <td class="nowrap">{gantry_core::time::format_utc(t.created_at)}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
