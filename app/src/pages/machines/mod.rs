//! "My machines": the machines the signed-in user may see, the create form
//! and the group's quota, all kept current while operations run.

pub mod charts;
pub mod create;
pub mod detail;
pub mod disk;
pub mod kept;
pub mod power;
pub mod reclaim;
pub mod run_limits;
pub mod schedule;
pub mod snapshots;
pub mod ssh;
pub mod terminal;
pub mod time_zone;

use crate::{
    api::{
        dashboard::my_quota,
        lists::machines_window,
        machines::{create_options, CreateMachine},
        volumes::{kept_volumes, DeleteKeptVolume},
    },
    components::{
        list_nav::{past_end, use_list_query, FilterForm, Pager, StateLinks},
        poll::busy_when,
        poll::poll,
        quota_gauge::QuotaGauge,
        status::tag,
    },
    model::machines::{gpu_summary, volume_summary},
};
use create::CreateForm;
use gantry_platform::machines::MachineView;
use kept::KeptVolumes;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn MachinesPage() -> impl IntoView {
    let create = ServerAction::<CreateMachine>::new();
    let delete_kept = ServerAction::<DeleteKeptVolume>::new();
    // One window of the list, as the URL's filters and page say.
    let query = use_list_query();
    let machines = Resource::new(move || query.get(), |q| machines_window(q.state, q.user, q.group, q.page));
    let quota = Resource::new(|| (), |_| my_quota());
    let kept = Resource::new(|| (), |_| kept_volumes());
    let options = Resource::new(|| (), |_| create_options());

    view! {
        // Refreshed quickly while any machine is between states.
        {poll(busy_when(machines, |w| w.rows.iter().any(|m| m.state.is_busy())))}
        <Title text="My machines"/>
        <h1>"My machines"</h1>
        <reclaim::ReclaimBanner/>
        <div class="grid">
            <section class="card" id="create">
                <h2>"New machine"</h2>
                <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || options.get().map(|r| match r {
                        Ok(o) => view! { <CreateForm create=create options=o/> }.into_any(),
                        Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                    })}
                </Suspense>
            </section>
            <section class="card">
                <h2>"GPU quota"</h2>
                <Transition fallback=|| view! { <p class="muted">"Loading quota…"</p> }>
                    {move || quota.get().map(|q| match q {
                        Ok(q) => view! { <QuotaGauge quota=q/> }.into_any(),
                        Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                    })}
                </Transition>
                <p class="muted small">
                    "A machine holds its GPUs from the moment it is admitted until it is deleted; "
                    "deleting gives them back to the group."
                </p>
            </section>
        </div>
        <section class="card">
            <h2>"Machines"</h2>
            {move || view! { <FilterForm base="/machines" query=query.get() user_label="Owner"/> }}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || machines.get().map(|r| match r {
                    Ok(w) => {
                        let filtered = query.with(|q| q.state.is_some() || q.user.is_some() || q.group.is_some());
                        view! {
                            <StateLinks base="/machines" query=query.get_untracked() counts=w.counts.clone()/>
                            {(!past_end(&w.counts)).then(|| view! { <MachineTable machines=w.rows filtered=filtered/> })}
                            <Pager base="/machines" query=query.get_untracked() counts=w.counts/>
                        }.into_any()
                    }
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
        <KeptVolumes kept=kept delete=delete_kept/>
    }
}

#[component]
fn MachineTable(machines: Vec<MachineView>, filtered: bool) -> impl IntoView {
    if machines.is_empty() && filtered {
        return view! { <p class="muted" data-testid="no-machines">"No machine matches these filters."</p> }.into_any();
    }
    if machines.is_empty() {
        return view! { <p class="muted" data-testid="no-machines">"No machines yet. Create one with the form."</p> }
            .into_any();
    }
    view! {
        <table class="table" data-testid="machines">
            <thead>
                <tr>
                    <th>"Name"</th><th>"State"</th><th>"GPUs"</th><th>"Node"</th><th>"Volume"</th>
                    <th>"Image"</th><th>"Owner"</th><th>"Created (UTC)"</th>
                </tr>
            </thead>
            <tbody>
                {machines.into_iter().map(|m| view! {
                    <tr data-testid="machine-row" data-name=m.name.clone() data-state=m.state.as_str()>
                        <td class="nowrap"><a href=format!("/machines/{}", m.id)><strong>{m.name.clone()}</strong></a></td>
                        <td>{power::state_badge(&m)}</td>
                        <td>
                            <span class="nowrap" data-testid="machine-gpus">{gpu_summary(m.gpu_count, &m.gpu_model, &m.gpu_indexes)}</span>
                            {m.simulated.then(|| view! { " " {tag("simulated", "no NVIDIA driver on this node: the GPUs are simulated")} })}
                        </td>
                        <td>{m.node.clone().unwrap_or_else(|| "—".into())}</td>
                        <td>
                            <span class="nowrap">{volume_summary(&m.volume_name, m.volume_size_gb)}</span>
                            {(!m.volume_enforced).then(|| view! { " " {tag("size not enforced", "a plain Docker volume: the size is not a hard limit on this node")} })}
                        </td>
                        <td>{m.image.clone()}</td>
                        <td>{m.owner.clone()}</td>
                        <td class="nowrap">{gantry_core::time::format_utc(m.created_at)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
