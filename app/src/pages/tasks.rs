//! The operation tasks the signed-in user may see, newest first, kept
//! current while any is still running.

use crate::{
    api::machines::my_tasks,
    components::{poll::poll, task_table::TaskTable},
    model::machines::task_busy,
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn TasksPage() -> impl IntoView {
    let tick = RwSignal::new(0u64);
    let tasks = Resource::new(move || tick.get(), |_| my_tasks());
    let busy = Signal::derive(move || {
        tasks.with(|t| t.as_ref().and_then(|r| r.as_ref().ok()).is_some_and(|l| l.iter().any(|t| task_busy(&t.state))))
    });
    poll(tick, busy);
    view! {
        <Title text="Tasks"/>
        <h1>"Tasks"</h1>
        <section class="card">
            <p class="muted small">"Every operation on a machine is a task: pending → scheduled → running → succeeded, failed or cancelled. Refused requests are listed as failed with the reason."</p>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || tasks.get().map(|r| match r {
                    Ok(list) => view! { <TaskTable tasks=list show_machine=true/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}
