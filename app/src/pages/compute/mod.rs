//! Compute tasks: the submission form and the tasks the user may see, a
//! window at a time with filters, counts per state and a pager (as /tasks),
//! kept current while any shown is still going. The form is built once
//! from its options (never refetched), outside the polled list, so a poll
//! never resets what is being typed.

pub mod detail;
pub mod form;

use crate::{
    api::{
        compute::{compute_options, CancelCompute, SubmitCompute},
        lists::compute_window,
    },
    components::{
        form_error::{error, FormError},
        list_nav::{use_list_query, FilterForm, Pager, StateLinks},
        poll::busy_when,
        poll::poll,
        status::task_state_badge,
    },
    model::{
        compute::{compute_cancellable, task_combo, ComputeRow},
        machines::task_busy,
    },
    signed_in,
};
use form::SubmitForm;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ComputePage() -> impl IntoView {
    let submit = ServerAction::<SubmitCompute>::new();
    let cancel = ServerAction::<CancelCompute>::new();
    // One window of the list, as the URL's filters and page say.
    let query = use_list_query();
    let tasks = Resource::new(move || query.get(), |q| compute_window(q.state, q.user, q.group, q.page));
    let options = Resource::new(|| (), |_| compute_options());
    view! {
        {poll(busy_when(tasks, |w| w.rows.iter().any(|t| task_busy(&t.state))))}
        <Title text="Compute"/>
        <h1>"Compute tasks"</h1>
        <section class="card">
            <h2>"New compute task"</h2>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || options.get().map(|r| match r {
                    Ok(o) => view! { <SubmitForm submit=submit options=o/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Suspense>
        </section>
        <section class="card stack">
            <h2>"Tasks"</h2>
            <p class="muted small">
                "A task goes to a region that has an image for its framework and room for its resources; "
                "it holds its GPUs (from the group's quota) while it runs and gives them back when it ends."
            </p>
            <FormError message=error(cancel)/>
            {move || crate::components::flash::answer(cancel).map(|id| view! {
                <p class="form-ok" role="status" data-testid="cancel-ok">"Cancel of task #" {id} " requested."</p>
            })}
            {move || view! { <FilterForm base="/compute" query=query.get() user_label="Requested by"/> }}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || tasks.get().map(|r| match r {
                    Ok(w) => {
                        let filtered = query.with(|q| q.state.is_some() || q.user.is_some() || q.group.is_some());
                        view! {
                            <StateLinks base="/compute" query=query.get_untracked() counts=w.counts.clone()/>
                            <ComputeTable tasks=w.rows cancel=cancel filtered=filtered/>
                            <Pager base="/compute" query=query.get_untracked() counts=w.counts/>
                        }.into_any()
                    }
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn ComputeTable(tasks: Vec<ComputeRow>, cancel: ServerAction<CancelCompute>, filtered: bool) -> impl IntoView {
    if tasks.is_empty() && filtered {
        return view! { <p class="muted" data-testid="no-compute-tasks">"No compute task matches these filters."</p> }
            .into_any();
    }
    if tasks.is_empty() {
        return view! { <p class="muted" data-testid="no-compute-tasks">"No compute tasks yet."</p> }.into_any();
    }
    let me = signed_in();
    // The server decides; this only hides a button it would refuse.
    let may_cancel = move |t: &ComputeRow| {
        compute_cancellable(&t.state) && me.as_ref().is_some_and(|m| m.is_admin() || m.username == t.requester)
    };
    view! {
        <table class="table" data-testid="compute-tasks">
            <thead>
                <tr>
                    <th>"#"</th><th>"Name"</th><th>"Framework"</th><th>"State"</th><th>"Region"</th><th>"Node"</th>
                    <th>"Exit"</th><th>"Message"</th><th>"By"</th><th>"Created (UTC)"</th>
                    <th><span class="visually-hidden">"Actions"</span></th>
                </tr>
            </thead>
            <tbody>
                {tasks.into_iter().map(|t| {
                    let action = may_cancel(&t).then(|| view! {
                        <ActionForm action=cancel attr:class="inline" attr:data-testid="cancel-compute">
                            <input type="hidden" name="task_id" value=t.id/>
                            <button type="submit" aria-label=format!("Cancel task {}", t.id)>"Cancel"</button>
                        </ActionForm>
                    });
                    let dash = || "—".to_string();
                    view! {
                        <tr data-testid="compute-row" data-id=t.id data-name=t.name.clone() data-state=t.state.clone()>
                            <td>{t.id}</td>
                            <td class="nowrap"><a href=format!("/compute/{}", t.id)><strong>{t.name.clone()}</strong></a></td>
                            <td>{task_combo(&t)}</td>
                            <td>{task_state_badge(t.state.clone())}</td>
                            <td>{t.region.clone().unwrap_or_else(dash)}</td>
                            <td>{t.node.clone().unwrap_or_else(dash)}</td>
                            <td>{t.exit_code.map(|c| c.to_string()).unwrap_or_else(dash)}</td>
                            <td class="message">{t.message.clone()}</td>
                            <td>{t.requester.clone()}</td>
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
