//! The "datasets" field of the create-machine and compute-task forms:
//! sealed versions, named `code/version`, bound read-only into the
//! container. The server checks every name (visible, sealed) and refuses
//! the whole request, saying which, if one fails.

use leptos::prelude::*;

#[component]
pub fn DatasetField() -> impl IntoView {
    view! {
        <label>"Datasets (optional)"
            <input type="text" name="datasets" autocomplete="off" spellcheck="false" placeholder="imagenet/v1, coco/v2"/>
        </label>
        <p class="muted small">
            "Sealed dataset versions, comma-separated; each is mounted read-only at /datasets/<code>/<version>."
        </p>
    }
}
