use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Not found"/>
        <section class="card empty">
            <h1>"Page not found"</h1>
            <p class="muted">"There is nothing at this address."</p>
            <a href="/" class="button">"Back to the portal"</a>
        </section>
    }
}
