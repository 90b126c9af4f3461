//! "My machines": the machines the signed-in user may see, the create form
//! and the group's quota, all kept current while operations run.

pub mod detail;

use crate::{
    api::{
        dashboard::my_quota,
        machines::{create_options, my_machines, CreateMachine},
    },
    components::{
        form_error::{error_text, FormError},
        poll::poll,
        quota_gauge::QuotaGauge,
        status::{MachineBadge, Tag},
    },
    model::machines::{gpu_summary, machine_busy, volume_summary, CreateOptions, MachineRow, DEFAULT_VOLUME_GB},
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn MachinesPage() -> impl IntoView {
    let create = ServerAction::<CreateMachine>::new();
    let tick = RwSignal::new(0u64);
    let machines = Resource::new(move || (tick.get(), create.version().get()), |_| my_machines());
    let quota = Resource::new(move || (tick.get(), create.version().get()), |_| my_quota());
    let options = Resource::new(|| (), |_| create_options());
    // Poll quickly while any machine is between states.
    let busy = Signal::derive(move || {
        machines.with(|m| m.as_ref().and_then(|r| r.as_ref().ok()).is_some_and(|l| l.iter().any(|m| machine_busy(&m.state))))
    });
    poll(tick, busy);

    view! {
        <Title text="My machines"/>
        <h1>"My machines"</h1>
        <div class="grid">
            <section class="card">
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
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || machines.get().map(|r| match r {
                    Ok(list) => view! { <MachineTable machines=list/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn CreateForm(create: ServerAction<CreateMachine>, options: CreateOptions) -> impl IntoView {
    // Same name rule as the server, checked as you type.
    let (name, set_name) = signal(String::new());
    let name_hint = move || {
        let n = name.get();
        (!n.is_empty()).then(|| gantry_core::validate::name("machine name", n.trim()).err().map(|e| e.to_string())).flatten()
    };
    let pending = create.pending();
    let max = options.max_gpus_per_machine.max(1);
    let no_images = options.images.is_empty();
    let no_models = options.gpu_models.is_empty();

    view! {
        <ActionForm action=create attr:class="stack" attr:data-testid="create-machine">
            <label>"Name"
                <input type="text" name="name" required maxlength="32" autocomplete="off" placeholder="e.g. my-box"
                    on:input=move |ev| set_name.set(event_target_value(&ev))/>
            </label>
            {move || name_hint().map(|h| view! { <p class="hint">{h}</p> })}
            <label>"Image"
                <select name="image_id">
                    {if no_images {
                        view! { <option value="">"default image"</option> }.into_any()
                    } else {
                        options.images.into_iter().map(|i| {
                            let label = if i.description.is_empty() { i.name.clone() } else { format!("{} — {}", i.name, i.description) };
                            view! { <option value=i.id.to_string() selected=i.is_default>{label}</option> }
                        }).collect_view().into_any()
                    }}
                </select>
            </label>
            {no_images.then(|| view! { <p class="hint">"No images are configured yet; an administrator must add one."</p> })}
            <div class="row">
                <label>"GPU count"
                    <input type="number" name="gpu_count" min="1" max=max value="1" step="1" required/>
                </label>
                <label>"GPU model"
                    <select name="gpu_model">
                        <option value="" selected>"any allowed"</option>
                        {options.gpu_models.into_iter().map(|m| view! { <option value=m.clone()>{m.clone()}</option> }).collect_view()}
                    </select>
                </label>
            </div>
            {no_models.then(|| view! { <p class="hint">"No GPUs your group may use are registered yet."</p> })}
            <label>"Volume size (GB)"
                <input type="number" name="volume_size_gb" min="1" max="4096" step="1" value=DEFAULT_VOLUME_GB required/>
            </label>
            <p class="muted small">"At most " {max} " GPUs per machine for group " {options.quota.group.clone()} "."</p>
            <FormError message=Signal::derive(move || create.value().with(error_text))/>
            {move || create.value().get().and_then(Result::ok).map(|c| view! {
                <p class="form-ok" role="status" data-testid="create-ok">
                    "Machine " <a href=format!("/machines/{}", c.machine_id)><strong>{c.name.clone()}</strong></a>
                    " admitted: " {gpu_summary(c.gpu_indexes.len() as i64, &c.model, &c.gpu_indexes)} " on " {c.node.clone()}
                </p>
            })}
            <button type="submit" class="primary" disabled=pending>
                {move || if pending.get() { "Creating…" } else { "Create machine" }}
            </button>
        </ActionForm>
    }
}

#[component]
fn MachineTable(machines: Vec<MachineRow>) -> impl IntoView {
    if machines.is_empty() {
        return view! { <p class="muted" data-testid="no-machines">"No machines yet. Create one with the form."</p> }.into_any();
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
                    <tr data-testid="machine-row" data-name=m.name.clone() data-state=m.state.clone()>
                        <td class="nowrap"><a href=format!("/machines/{}", m.id)><strong>{m.name.clone()}</strong></a></td>
                        <td><MachineBadge state=m.state.clone()/></td>
                        <td>
                            <span class="nowrap" data-testid="machine-gpus">{gpu_summary(m.gpu_count, &m.gpu_model, &m.gpu_indexes)}</span>
                            {m.simulated.then(|| view! { " " <Tag text="simulated" title="no NVIDIA driver on this node: the GPUs are simulated"/> })}
                        </td>
                        <td>{m.node.clone().unwrap_or_else(|| "—".into())}</td>
                        <td>
                            <span class="nowrap">{volume_summary(&m.volume_name, m.volume_size_gb)}</span>
                            {(!m.volume_enforced).then(|| view! { " " <Tag text="size not enforced" title="a plain Docker volume: the size is not a hard limit on this node"/> })}
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
