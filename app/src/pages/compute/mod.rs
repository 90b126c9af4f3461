//! Compute tasks: the submission form and the tasks the user may see, a
//! window at a time with filters, counts per state and a pager (as /tasks),
//! kept current while any shown is still going. The form is built once
//! from its options (never refetched), outside the polled list, so a poll
//! never resets what is being typed.

pub mod detail;
pub mod explain;
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
    model::compute::{compute_cancellable, duration_label},
    signed_in,
};
use form::SubmitForm;
use gantry_platform::compute::ComputeTaskView;
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
        {poll(busy_when(tasks, |w| w.rows.iter().any(|t| !t.state.is_terminal())))}
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
fn ComputeTable(tasks: Vec<ComputeTaskView>, cancel: ServerAction<CancelCompute>, filtered: bool) -> impl IntoView {
    if tasks.is_empty() && filtered {
        return view! { <p class="muted" data-testid="no-compute-tasks">"No compute task matches these filters."</p> }
            .into_any();
    }
    if tasks.is_empty() {
        return view! { <p class="muted" data-testid="no-compute-tasks">"No compute tasks yet."</p> }.into_any();
    }
    let me = signed_in();
    // The server decides; this only hides a button it would refuse.
    let may_cancel = move |t: &ComputeTaskView| {
        compute_cancellable(t.state) && me.as_ref().is_some_and(|m| m.is_admin() || m.username == t.requester)
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
                        <tr data-testid="compute-row" data-id=t.id data-name=t.name.clone() data-state=t.state.as_str()>
                            <td>{t.id}</td>
                            <td class="nowrap"><a href=format!("/compute/{}", t.id)><strong>{t.name.clone()}</strong></a></td>
                            <td>{t.combo_label()}</td>
                            <td>{task_state_badge(t.state)}</td>
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

/// "1 × any GPU · 0.5 CPU · 256 MB · time limit 10 min".
pub(crate) fn resources_label(t: &ComputeTaskView) -> String {
    let cpus = t.cpu_millis as f64 / 1000.0;
    format!("{} · {cpus} CPU · {} MB · time limit {}", gpus_label(t), t.memory_mb, duration_label(t.time_limit_secs))
}

/// "2 × A100", or "2 × any GPU" when the task names no model.
pub(crate) fn gpus_label(t: &ComputeTaskView) -> String {
    format!("{} × {}", t.gpu_count, t.gpu_model.as_deref().unwrap_or("any GPU"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_core::task::TaskState;

    fn task(gpu_count: i64, cpu_millis: i64, memory_mb: i64, time_limit_secs: i64) -> ComputeTaskView {
        ComputeTaskView {
            id: 1,
            name: "t".into(),
            requester: "alice".into(),
            framework: "PyTorch".into(),
            framework_version: "2.4".into(),
            interpreter: "Python".into(),
            interpreter_version: "3.11".into(),
            command: "[]".into(),
            gpu_count,
            gpu_model: None,
            cpu_millis,
            memory_mb,
            time_limit_secs,
            state: TaskState::Pending,
            message: String::new(),
            decision: None,
            region: None,
            image: None,
            machine_id: None,
            node: None,
            exit_code: None,
            logs_tail: String::new(),
            created_at: 0,
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn resources_read_naturally() {
        let t = task(1, 500, 256, 600);
        assert_eq!(resources_label(&t), "1 × any GPU · 0.5 CPU · 256 MB · time limit 10 min");
        let t = ComputeTaskView { gpu_model: Some("A100".into()), ..task(2, 2000, 1024, 60) };
        assert_eq!(resources_label(&t), "2 × A100 · 2 CPU · 1024 MB · time limit 1 min");
        assert_eq!(t.combo_label(), "PyTorch 2.4 · Python 3.11");
    }
}
