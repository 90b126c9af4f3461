//! The operation tasks the signed-in user may see, newest first, kept
//! current while any is still running; tasks not yet started can be
//! cancelled here.

use crate::{
    api::{lists::tasks_window, machines::CancelTask},
    components::{
        form_error::{error, FormError},
        list_nav::{past_end, use_list_query, FilterForm, Pager, StateLinks},
        poll::busy_when,
        poll::poll,
        task_table::TaskTable,
    },
    model::machines::task_busy,
};
use leptos::prelude::*;
use leptos_meta::Title;

fn task_kinds() -> Vec<&'static str> {
    gantry_core::task::TaskKind::ALL.iter().map(|k| k.as_str()).collect()
}

#[component]
pub fn TasksPage() -> impl IntoView {
    let cancel = ServerAction::<CancelTask>::new();
    let query = use_list_query();
    let tasks = Resource::new(move || query.get(), |q| tasks_window(q.state, q.user, q.group, q.kind, q.page));
    view! {
        {poll(busy_when(tasks, |w| w.rows.iter().any(|t| task_busy(t.state))))}
        <Title text="Tasks"/>
        <h1>"Tasks"</h1>
        <section class="card stack">
            <p class="muted small">"Every operation on a machine is a task: pending → scheduled → running → succeeded, failed or cancelled. Refused requests are listed as failed with the reason. A task can be cancelled until it starts running."</p>
            <FormError message=error(cancel)/>
            {move || crate::components::flash::answer(cancel).map(|id| view! {
                <p class="form-ok" role="status" data-testid="cancel-ok">"Task #" {id} " cancelled."</p>
            })}
            {move || view! { <FilterForm base="/tasks" query=query.get() kinds=task_kinds() user_label="Requested by"/> }}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || tasks.get().map(|r| match r {
                    Ok(w) => view! {
                        <StateLinks base="/tasks" query=query.get_untracked() counts=w.counts.clone()/>
                        {(!past_end(&w.counts)).then(|| view! { <TaskTable tasks=w.rows cancel=cancel show_machine=true/> })}
                        <Pager base="/tasks" query=query.get_untracked() counts=w.counts/>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}
