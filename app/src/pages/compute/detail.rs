//! One compute task: what it runs and with what, where it went and why
//! (or why it waits), its exit code and its output — live from the
//! container while it runs, the kept tail once it has ended. Refreshed
//! while the task is not finished; without JavaScript, "Refresh" reloads.
//! live.js merges a refresh into the page: the output keeps its element
//! (and the reader's scroll position) and only its text changes.

use crate::{
    api::compute::{compute_detail, CancelCompute, ComputeDetail},
    components::{
        form_error::{error, FormError},
        poll::busy_when,
        poll::poll,
        status::task_state_badge,
    },
    error::AppError,
    model::compute::{command_text, compute_cancellable},
    pages::compute::{
        explain::{explain, Explanation},
        resources_label,
    },
    signed_in,
};
use gantry_platform::compute::ComputeTaskView;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn ComputeTaskPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|s| s.parse::<i64>().ok()));
    let cancel = ServerAction::<CancelCompute>::new();
    let detail = Resource::new(id, |id| async move {
        match id {
            Some(id) => compute_detail(id).await,
            None => Err(AppError::NotFound("compute task not found".into())),
        }
    });
    view! {
        {poll(busy_when(detail, |d| !d.task.state.is_terminal()))}
        <p class="crumbs"><a href="/compute">"← Compute tasks"</a></p>
        <FormError message=error(cancel)/>
        {crate::components::flash::answer(cancel).map(|id| view! {
            <p class="form-ok" role="status" data-testid="cancel-ok">"Cancel of task #" {id} " requested."</p>
        })}
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || detail.get().map(|d| match d {
                Ok(d) => view! { <TaskView d=d cancel=cancel/> }.into_any(),
                Err(AppError::NotFound(_)) => {
                    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
                        resp.set_status(http::StatusCode::NOT_FOUND);
                    }
                    view! {
                        <Title text="Compute task not found"/>
                        <section class="card empty" data-testid="compute-not-found">
                            <h1>"Compute task not found"</h1>
                            <p class="muted">"There is no such task, or it belongs to another group."</p>
                        </section>
                    }
                    .into_any()
                }
                Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
            })}
        </Suspense>
    }
}

#[component]
fn TaskView(d: ComputeDetail, cancel: ServerAction<CancelCompute>) -> impl IntoView {
    let ComputeDetail { task, decision, output, output_live: live, log_url, command } = d;
    let why = decision.map(|d| explain(&d, task.state, &task.message));
    let busy = !task.state.is_terminal();
    let (id, name) = (task.id, task.name.clone());
    let (shell, command) = command_text(&command);
    let mine = signed_in().is_some_and(|m| m.is_admin() || m.username == task.requester);
    let may_cancel = mine && compute_cancellable(task.state);
    let output_note = match (live, output.is_empty(), busy) {
        (true, _, _) => "Live: the container's latest lines, refreshed every few seconds.",
        (false, true, true) => "No output yet; it appears here once the task runs.",
        (false, true, false) => "The task printed nothing.",
        (false, false, _) => "The last lines, kept after the container was removed.",
    };
    let refresh = format!("/compute/{id}");
    view! {
        <Title text=format!("Compute task {name}")/>
        <div class="page-head">
            <h1>"#" {id} " " {name.clone()}</h1>
            {task_state_badge(task.state)}
            {busy.then(|| view! { <a href=refresh class="small">"Refresh"</a> })}
        </div>
        <div class="grid two">
            <section class="card">
                <h2>"Task"</h2>
                <TaskFacts t=task shell=shell command=command/>
                {may_cancel.then(|| view! {
                    <ActionForm action=cancel attr:class="inline" attr:data-testid="cancel-compute">
                        <input type="hidden" name="task_id" value=id/>
                        <button type="submit" class="danger">"Cancel task"</button>
                    </ActionForm>
                })}
            </section>
            <WhyCard why=why/>
        </div>
        <section class="card stack" data-testid="compute-output-card">
            <h2>"Output"</h2>
            <p class="muted small">{output_note} {log_url.map(|u| view! { " " <a href=u rel="external">"Whole log (text)"</a> })}</p>
            <pre class="output" data-testid="compute-output">{output}</pre>
        </section>
    }
}

#[component]
fn TaskFacts(t: ComputeTaskView, shell: bool, command: String) -> impl IntoView {
    let dash = || "—".to_string();
    let time = |at: Option<i64>| at.map(gantry_core::time::format_utc).unwrap_or_else(dash);
    view! {
        <dl class="facts" data-testid="compute-facts">
            <dt>"Framework"</dt><dd>{t.combo_label()}</dd>
            <dt>{if shell { "Shell script" } else { "Command (argv)" }}</dt><dd><pre class="output small" data-testid="compute-command">{command}</pre></dd>
            <dt>"Resources"</dt><dd>{resources_label(&t)}</dd>
            <dt>"Region"</dt><dd data-testid="compute-region">{t.region.clone().unwrap_or_else(dash)}</dd>
            <dt>"Image"</dt><dd>{t.image.clone().map(|i| view! { <code>{i}</code> })}</dd>
            <dt>"Node"</dt><dd>{t.node.clone().unwrap_or_else(dash)}</dd>
            <dt>"Exit code"</dt><dd data-testid="compute-exit">{t.exit_code.map(|c| c.to_string()).unwrap_or_else(dash)}</dd>
            <dt>"Message"</dt><dd data-testid="compute-message">{t.message.clone()}</dd>
            <dt>"Submitted by"</dt><dd>{t.requester.clone()}</dd>
            <dt>"Created (UTC)"</dt><dd>{gantry_core::time::format_utc(t.created_at)}</dd>
            <dt>"Started (UTC)"</dt><dd>{time(t.started_at)}</dd>
            <dt>"Finished (UTC)"</dt><dd>{time(t.finished_at)}</dd>
        </dl>
    }
}

#[component]
fn WhyCard(why: Option<Explanation>) -> impl IntoView {
    let Some(why) = why else {
        return view! {
            <section class="card" data-testid="compute-why">
                <h2>"Where it runs"</h2>
                <p class="muted">"Not decided yet."</p>
            </section>
        }
        .into_any();
    };
    view! {
        <section class="card stack" data-testid="compute-why">
            <h2>{why.heading}</h2>
            <p data-testid="why-summary"><strong>{why.summary}</strong></p>
            <ul class="why">
                {why.details.into_iter().map(|d| view! { <li>{d}</li> }).collect_view()}
            </ul>
        </section>
    }
    .into_any()
}
