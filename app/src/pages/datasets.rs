//! Dataset definitions, versions and uploads arrive with the datasets
//! issue; the page holds their place in the navigation.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn DatasetsPage() -> impl IntoView {
    view! {
        <Title text="Datasets"/>
        <h1>"Datasets"</h1>
        <section class="card empty">
            <p>"No datasets yet."</p>
            <p class="muted">"Dataset definitions, versions and uploads are not available in this version of Gantry."</p>
        </section>
    }
}
