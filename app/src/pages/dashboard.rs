//! The portal's front page: your machines with their state and current GPU
//! use, the warnings that need you (reclaim notices), your recent tasks and
//! compute tasks, a way to create a machine, your group's GPU quota and
//! who you are.

use crate::{
    api::dashboard::{dashboard, DashMachine},
    components::{
        next_steps::NextStepsCard,
        quota_gauge::QuotaGauge,
        status::{machine_state_badge, task_state_badge},
    },
    signed_in,
};
use gantry_core::task::MachineState;
use gantry_platform::{compute::ComputeTaskView, machines::TaskView};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn DashboardPage() -> impl IntoView {
    let me = signed_in();
    let (user, role, group) = me.map(|m| (m.username, m.role.to_string(), m.group_name)).unwrap_or_default();
    let name = user.clone();
    // One resource and one Suspense for the whole page's data.
    let data = Resource::new(|| (), |_| dashboard());
    let account = move || {
        let (user, role, group) = (user.clone(), role.clone(), group.clone());
        view! {
            <section class="card">
                <h2>"Account"</h2>
                <dl class="facts">
                    <dt>"User"</dt><dd data-testid="dash-user">{user}</dd>
                    <dt>"Role"</dt><dd>{role}</dd>
                    <dt>"Group"</dt><dd data-testid="dash-group">{group}</dd>
                </dl>
            </section>
        }
    };
    view! {
        <Title text="Portal"/>
        <h1>"Welcome, " {name}</h1>
        <crate::pages::machines::reclaim::ReclaimBanner/>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || data.get().map(|r| match r {
                Ok(d) => view! {
                    <NextStepsCard steps=d.next/>
                    <YourMachines machines=d.machines total=d.machines_total/>
                    <div class="grid">
                        <RecentTasks tasks=d.tasks/>
                        <RecentCompute tasks=d.compute/>
                    </div>
                    <div class="grid">
                        <section class="card">
                            <h2>"GPU quota"</h2>
                            <QuotaGauge quota=d.quota/>
                        </section>
                        {account()}
                    </div>
                }
                .into_any(),
                Err(e) => view! { <p class="form-error">{e.to_string()}</p> <div class="grid">{account()}</div> }.into_any(),
            })}
        </Suspense>
    }
}

/// "2 × SIM-A100 (GPU 0,1)", or "no GPU".
fn gpus_text(m: &gantry_platform::machines::MachineView) -> String {
    if m.gpu_count == 0 {
        return "no GPU".into();
    }
    let idx = m.gpu_indexes.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    if idx.is_empty() {
        format!("{} × {}", m.gpu_count, m.gpu_model)
    } else {
        format!("{} × {} (GPU {idx})", m.gpu_count, m.gpu_model)
    }
}

#[component]
fn YourMachines(machines: Vec<DashMachine>, total: i64) -> impl IntoView {
    let shown = machines.len() as i64;
    let list = if machines.is_empty() {
        view! { <p class="muted" data-testid="dash-no-machines">"You have no machines yet."</p> }.into_any()
    } else {
        let rows = machines.into_iter().map(|DashMachine { machine: m, gpu_use_pct }| {
            let gpu_use = match gpu_use_pct {
                Some(p) => format!("{p} %"),
                None if m.state == MachineState::Running && m.gpu_count > 0 => "no reading yet".into(),
                None => "—".into(),
            };
            // A machine that failed or was lost says why: it needs its owner.
            let warn = matches!(m.state, MachineState::Failed | MachineState::Lost) && !m.message.is_empty();
            let message = warn.then(
                || view! { <div class="form-error small" data-testid="dash-machine-warning">{m.message.clone()}</div> },
            );
            view! {
                <tr data-testid="dash-machine" data-name=m.name.clone() data-state=m.state.as_str()>
                    <td><a href=format!("/machines/{}", m.id)>{m.name.clone()}</a> {message}</td>
                    <td>{machine_state_badge(m.state)}</td>
                    <td>{gpus_text(&m)}</td>
                    <td data-testid="dash-gpu-use">{gpu_use}</td>
                    <td>{m.node.clone().unwrap_or_else(|| "—".into())}</td>
                </tr>
            }
        });
        view! {
            <table class="table" data-testid="dash-machine-list">
                <thead><tr><th>"Machine"</th><th>"State"</th><th>"GPUs"</th><th>"GPU use now"</th><th>"Node"</th></tr></thead>
                <tbody>{rows.collect_view()}</tbody>
            </table>
        }
        .into_any()
    };
    let more = (total > shown)
        .then(|| view! { <a href="/machines" data-testid="dash-all-machines">{format!("All {total} machines")}</a> });
    view! {
        <section class="card stack" data-testid="dash-machines">
            <div class="row spread">
                <h2>"Your machines"</h2>
                <a class="button primary" href="/machines#create" data-testid="dash-create">"Create a machine"</a>
            </div>
            {list}
            {more}
        </section>
    }
}

#[component]
fn RecentTasks(tasks: Vec<TaskView>) -> impl IntoView {
    let body = if tasks.is_empty() {
        view! { <p class="muted" data-testid="dash-no-tasks">"No tasks yet."</p> }.into_any()
    } else {
        let rows = tasks.into_iter().map(|t| {
            let machine = match t.machine_id {
                Some(id) => view! { <a href=format!("/machines/{id}")>{t.machine_name.clone()}</a> }.into_any(),
                None => view! { <span>{t.machine_name.clone()}</span> }.into_any(),
            };
            view! {
                <tr data-testid="dash-task" data-kind=t.kind.as_str()>
                    <td>{t.shown_kind()}</td>
                    <td>{machine}</td>
                    <td>{task_state_badge(t.state)}</td>
                    <td class="nowrap">{gantry_core::time::format_utc(t.created_at)}</td>
                </tr>
            }
        });
        view! {
            <table class="table">
                <thead><tr><th>"Task"</th><th>"Machine"</th><th>"State"</th><th>"Requested (UTC)"</th></tr></thead>
                <tbody>{rows.collect_view()}</tbody>
            </table>
        }
        .into_any()
    };
    view! {
        <section class="card stack" data-testid="dash-tasks">
            <h2>"Recent tasks"</h2>
            {body}
            <a href="/tasks">"All tasks"</a>
        </section>
    }
}

#[component]
fn RecentCompute(tasks: Vec<ComputeTaskView>) -> impl IntoView {
    let body = if tasks.is_empty() {
        view! { <p class="muted" data-testid="dash-no-compute">"No compute tasks yet."</p> }.into_any()
    } else {
        let rows = tasks.into_iter().map(|t| {
            let gpus = crate::pages::compute::gpus_label(&t);
            view! {
                <tr data-testid="dash-compute-task" data-name=t.name.clone()>
                    <td><a href=format!("/compute/{}", t.id)>{t.name.clone()}</a></td>
                    <td>{task_state_badge(t.state)}</td>
                    <td>{gpus}</td>
                    <td class="nowrap">{gantry_core::time::format_utc(t.created_at)}</td>
                </tr>
            }
        });
        view! {
            <table class="table">
                <thead><tr><th>"Compute task"</th><th>"State"</th><th>"GPUs"</th><th>"Submitted (UTC)"</th></tr></thead>
                <tbody>{rows.collect_view()}</tbody>
            </table>
        }
        .into_any()
    };
    view! {
        <section class="card stack" data-testid="dash-compute">
            <h2>"Recent compute tasks"</h2>
            {body}
            <a href="/compute">"All compute tasks"</a>
        </section>
    }
}
