//! The new-machine form: name, image, GPUs, data volume (new, or a kept
//! one), and optional CPU and memory limits. Every field is plain HTML, so
//! the form also posts without JavaScript; the server parses and decides.

use crate::{
    api::machines::CreateMachine,
    components::form_error::{error_text, FormError},
    model::machines::{
        gpu_summary, kept_volume_label, CreateOptions, KeptVolumeRow, DEFAULT_CPUS, DEFAULT_MEMORY_MB,
        DEFAULT_VOLUME_GB,
    },
};
use leptos::prelude::*;

/// `kept` is the latest list of kept volumes (None until the page's own
/// poll has answered; then the options' list is used). The form itself is
/// built once, so a poll never resets what is being typed.
#[component]
pub fn CreateForm(
    create: ServerAction<CreateMachine>,
    options: CreateOptions,
    kept: Signal<Option<Vec<KeptVolumeRow>>>,
) -> impl IntoView {
    // Same name rule as the server, checked as you type.
    let (name, set_name) = signal(String::new());
    let name_hint = move || {
        let n = name.get();
        (!n.is_empty())
            .then(|| gantry_core::validate::name("machine name", n.trim()).err().map(|e| e.to_string()))
            .flatten()
    };
    let pending = create.pending();
    let max = options.max_gpus_per_machine.max(1);
    let no_images = options.images.is_empty();
    let no_models = options.gpu_models.is_empty();
    let initial_kept = options.kept_volumes;
    let volumes = Memo::new(move |_| kept.get().unwrap_or_else(|| initial_kept.clone()));
    // The chosen volume survives the list being redrawn.
    let chosen = RwSignal::new(String::new());
    let on_kept = move || volumes.with(|vs| vs.iter().any(|v| v.id.to_string() == chosen.get()));

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
            <label>"Data volume"
                <select name="kept_volume_id" on:change=move |ev| chosen.set(event_target_value(&ev))>
                    <option value="" selected=move || chosen.get().is_empty()>"new volume"</option>
                    {move || volumes.get().into_iter().map(|v| {
                        let id = v.id.to_string();
                        let selected = { let id = id.clone(); move || chosen.get() == id };
                        view! { <option value=id selected=selected>{kept_volume_label(&v)}</option> }
                    }).collect_view()}
                </select>
            </label>
            {move || on_kept().then(|| view! { <p class="muted small">"The machine goes to the kept volume's node and keeps its size."</p> })}
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
            <FormError message=Signal::derive(move || create.value().with(error_text))/>
            {move || crate::components::nojs_done::answer(create).map(|c| view! {
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
