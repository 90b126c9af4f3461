//! Regions (compute centres): each with the resources of its nodes — GPUs
//! by model (total and free), CPUs, memory, nodes ready — and a form to add
//! one. Free GPUs change on their own, so the list refreshes now and then;
//! the form sits outside the refreshed part.

use crate::{
    api::catalogue::{list_regions, CreateRegion},
    components::{
        form_error::{error, FormError},
        poll::poll,
    },
    model::{catalogue::nodes_label, fleet::capacity_label},
};
use gantry_platform::catalogue::{GpuCount, RegionResources};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn RegionsPage() -> impl IntoView {
    let create = ServerAction::<CreateRegion>::new();
    let regions = Resource::new(|| (), |_| list_regions());
    view! {
        {poll(Signal::stored(false))}
        <Title text="Regions"/>
        <h1>"Regions"</h1>
        <section class="card stack">
            <p class="muted small">
                "A region is a compute centre: a set of nodes. Its resources are those of its nodes (lost nodes are left out). "
                "Compute tasks go to a region that has both a matching image and room; a node joins a region when it is added."
            </p>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || regions.get().map(|r| match r {
                    Ok(list) => view! { <RegionTable regions=list/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
        <section class="card">
            <h2>"New region"</h2>
            <ActionForm action=create attr:class="stack" attr:data-testid="create-region">
                <div class="row">
                    <label>"Code"
                        <input type="text" name="code" required maxlength="32" autocomplete="off" placeholder="e.g. eu-west"/>
                    </label>
                    <label>"Name"
                        <input type="text" name="name" required maxlength="64" autocomplete="off" placeholder="e.g. Frankfurt"/>
                    </label>
                </div>
                <label>"Description" <input type="text" name="description" maxlength="500"/></label>
                <p class="muted small">"The code is lower-case letters, digits, - _ and ., starting with a letter; it cannot change later."</p>
                <FormError message=error(create)/>
                {move || crate::components::flash::answer(create).map(|code| view! {
                    <p class="form-ok" role="status" data-testid="region-created">"Region " <strong>{code}</strong> " added."</p>
                })}
                <button type="submit" class="primary">"Add region"</button>
            </ActionForm>
        </section>
    }
}

#[component]
fn RegionTable(regions: Vec<RegionResources>) -> impl IntoView {
    if regions.is_empty() {
        return view! { <p class="muted">"No regions yet."</p> }.into_any();
    }
    view! {
        <table class="table" data-testid="regions">
            <thead>
                <tr><th>"Code"</th><th>"Name"</th><th>"Nodes"</th><th>"GPUs by model (free)"</th><th>"CPUs · memory"</th><th>"Description"</th></tr>
            </thead>
            <tbody>
                {regions.into_iter().map(|r| view! {
                    <tr data-testid="region-row" data-code=r.code.clone()>
                        <td><strong>{r.code.clone()}</strong></td>
                        <td>{r.name.clone()}</td>
                        <td class="nowrap" data-testid="region-nodes">{nodes_label(r.nodes, r.ready_nodes)}</td>
                        <td data-testid="region-gpus">{gpus_label(&r.gpus)}</td>
                        <td class="nowrap">{capacity_label(r.cpus, r.memory_mb)}</td>
                        <td>{r.description.clone()}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// "8 × SIM-A100-80GB (6 free)" per model, or "no GPUs".
fn gpus_label(gpus: &[GpuCount]) -> String {
    if gpus.is_empty() {
        return "no GPUs".to_string();
    }
    gpus.iter().map(|g| format!("{} × {} ({} free)", g.total, g.model, g.free)).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_read_as_people_say_them() {
        assert_eq!(gpus_label(&[]), "no GPUs");
        let g = [
            GpuCount { model: "A100".into(), total: 8, free: 6 },
            GpuCount { model: "H100".into(), total: 2, free: 0 },
        ];
        assert_eq!(gpus_label(&g), "8 × A100 (6 free), 2 × H100 (0 free)");
    }
}
