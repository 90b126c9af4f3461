//! The compute submission form: framework + interpreter from the master
//! image catalogue, the command (argv one per line, or a shell script),
//! resources and a time limit. Plain HTML fields, so it posts without
//! JavaScript too (the server then sends the browser to the task's page).

use crate::{
    api::compute::{ComputeOptions, SubmitCompute},
    components::form_error::{error, FormError},
    model::compute::{DEFAULT_COMPUTE_CPU_MILLIS, DEFAULT_COMPUTE_MEMORY_MB, DEFAULT_TIME_LIMIT_MIN},
};
use leptos::prelude::*;

#[component]
pub fn SubmitForm(submit: ServerAction<SubmitCompute>, options: ComputeOptions) -> impl IntoView {
    let no_frameworks = options.frameworks.is_empty();
    let max = options.quota.max_gpus_per_machine.max(1);
    let default_cpus = (DEFAULT_COMPUTE_CPU_MILLIS as f64 / 1000.0).to_string();
    view! {
        <ActionForm action=submit attr:class="stack" attr:data-testid="submit-compute">
            <div class="row">
                <label>"Name"
                    <input type="text" name="name" maxlength="32" autocomplete="off" placeholder="task"/>
                </label>
                <label>"Framework · interpreter"
                    <select name="master_image_id" required>
                        {options.frameworks.into_iter().map(|f| {
                            let label = if f.linked { f.label.clone() } else { format!("{} (no region image yet)", f.label) };
                            view! { <option value=f.master_image_id>{label}</option> }
                        }).collect_view()}
                    </select>
                </label>
            </div>
            {no_frameworks.then(|| view! { <p class="hint">"The catalogue is empty; an administrator must add a master image first."</p> })}
            <label>"Command"
                <textarea name="command" rows="4" required spellcheck="false" class="code"
                    placeholder="python\ntrain.py\n--epochs=3"></textarea>
            </label>
            <label class="check">
                <input type="checkbox" name="shell"/>
                " Shell: run the text as a script with /bin/sh -c"
            </label>
            <p class="muted small">
                "The program on the first line, then one argument per line; no shell, so nothing is expanded or quoted. "
                "With Shell ticked, the whole text is one shell script: pipes, variables and && work."
            </p>
            <div class="row">
                <label>"GPU count" <input type="number" name="gpu_count" min="1" max=max value="1" step="1" required/></label>
                <label>"GPU model"
                    <select name="gpu_model">
                        <option value="" selected>"any allowed"</option>
                        {options.gpu_models.into_iter().map(|m| view! { <option value=m.clone()>{m.clone()}</option> }).collect_view()}
                    </select>
                </label>
            </div>
            <div class="row">
                <label>"CPUs" <input type="text" name="cpus" inputmode="decimal" autocomplete="off" placeholder=default_cpus.clone()/></label>
                <label>"Memory (MB)" <input type="number" name="memory_mb" min="64" step="1" placeholder=DEFAULT_COMPUTE_MEMORY_MB.to_string()/></label>
            </div>
            <crate::components::dataset_field::DatasetField/>
            <div class="row">
                <label>"Time limit" <input type="number" name="time_limit" min="1" step="1" value=DEFAULT_TIME_LIMIT_MIN required/></label>
                <label>"Unit"
                    <select name="time_unit">
                        <option value="min" selected>"minutes"</option>
                        <option value="s">"seconds"</option>
                    </select>
                </label>
            </div>
            <p class="muted small">
                "Empty CPUs and memory mean " {default_cpus} " CPU and " {DEFAULT_COMPUTE_MEMORY_MB} " MB. "
                "The GPUs count against group " {options.quota.group.clone()} "'s quota of " {options.quota.gpu_quota}
                " while the task runs; "
                "a task past its time limit is stopped and fails."
            </p>
            <FormError message=error(submit)/>
            <button type="submit" class="primary">"Submit task"</button>
        </ActionForm>
    }
}
