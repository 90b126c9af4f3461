//! The new-machine form: name, image, GPUs, data volume (new, or a kept
//! one), and optional CPU and memory limits. Every field is plain HTML, so
//! the form also posts without JavaScript; the server parses and decides.

use crate::{
    api::machines::{CreateMachine, CreateOptions},
    components::form_error::{error, FormError},
    model::machines::{gpu_summary, DEFAULT_CPUS, DEFAULT_MEMORY_MB, DEFAULT_VOLUME_GB},
};
use gantry_platform::machines::KeptVolumeView;
use leptos::prelude::*;

/// The form; live.js keeps what is being typed when the page refreshes.
#[component]
pub fn CreateForm(create: ServerAction<CreateMachine>, options: CreateOptions) -> impl IntoView {
    let max = options.max_gpus_per_machine.max(1);
    let no_images = options.images.is_empty();
    let no_models = options.gpu_models.is_empty();
    let volumes: Vec<KeptVolumeView> = options.kept_volumes;
    let any_kept = !volumes.is_empty();

    view! {
        <ActionForm action=create attr:class="stack" attr:data-testid="create-machine">
            <label>"Name"
                <input type="text" name="name" required maxlength="32" autocomplete="off" placeholder="e.g. my-box"/>
            </label>
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
            <label>"Data volume"
                <select name="kept_volume_id">
                    <option value="" selected>"new volume"</option>
                    {volumes.into_iter().map(|v| view! { <option value=v.id.to_string()>{v.label()}</option> }).collect_view()}
                </select>
            </label>
            {any_kept.then(|| view! { <p class="muted small">"On a kept volume, the machine goes to the volume's node and keeps its size."</p> })}
            <label>"Volume size (GB)"
                <input type="number" name="volume_size_gb" min="1" max="4096" step="1" value=DEFAULT_VOLUME_GB required/>
            </label>
            <div class="row">
                <label>"CPUs"
                    <input type="text" name="cpus" inputmode="decimal" autocomplete="off" placeholder=DEFAULT_CPUS/>
                </label>
                <label>"Memory (MB)"
                    <input type="number" name="memory_mb" min="64" step="1" placeholder=DEFAULT_MEMORY_MB.to_string()/>
                </label>
            </div>
            <crate::components::dataset_field::DatasetField/>
            <p class="muted small">
                "At most " {max} " GPUs per machine for group " {options.quota.group.clone()} ". "
                "Empty CPUs and memory mean " {DEFAULT_CPUS} " CPUs and " {DEFAULT_MEMORY_MB} " MB."
            </p>
            <FormError message=error(create)/>
            {crate::components::flash::answer(create).map(|c| view! {
                <p class="form-ok" role="status" data-testid="create-ok">
                    "Machine " <a href=format!("/machines/{}", c.machine_id)><strong>{c.name.clone()}</strong></a>
                    " admitted: " {gpu_summary(c.gpu_indexes.len() as i64, &c.model, &c.gpu_indexes)} " on " {c.node.clone()}
                </p>
            })}
            <button type="submit" class="primary">"Create machine"</button>
        </ActionForm>
    }
}
