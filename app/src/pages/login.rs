//! The sign-in page. A plain form: it works before the wasm loads and with
//! JavaScript off; with JavaScript it submits without a page load. Its
//! error box shows only the server's own answer: an error carried in the
//! URL (after a no-JS post) is signed by the server, and the server strips
//! one it did not sign.

use crate::{
    api::auth::Login,
    components::form_error::{error_text, FormError},
    use_session,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    let me = use_session().0;
    // Signed in (with JavaScript): remember who, and the Redirect below
    // takes us on.
    Effect::new(move |_| {
        if let Some(Ok(user)) = login.value().get() {
            me.set(Some(user));
        }
    });
    let next = move || use_query_map().with(|q| q.get("next")).unwrap_or_default();
    let pending = login.pending();

    view! {
        <Title text="Sign in"/>
        <Show when=move || me.with(Option::is_some)>
            {move || {
                let forced = me.with(|m| m.as_ref().is_some_and(|m| m.must_change_password));
                let to = if forced { crate::api::auth::CHANGE_PASSWORD_PAGE.to_string() } else { crate::api::auth::safe_next(Some(&next())) };
                view! { <Redirect path=to/> }
            }}
        </Show>
        <main class="login">
            <ActionForm action=login attr:class="card login-card">
                <h1>
                    <img src="/favicon.svg" alt="" width="32" height="32"/>
                    " Gantry"
                </h1>
                <p class="muted">"Sign in to your GPU workspace."</p>
                <label>
                    "Username"
                    <input type="text" name="username" autocomplete="username" required maxlength="64" autofocus/>
                </label>
                <label>
                    "Password"
                    <input type="password" name="password" autocomplete="current-password" required maxlength="256"/>
                </label>
                <input type="hidden" name="next" value=next/>
                <FormError message=Signal::derive(move || login.value().with(error_text))/>
                <button type="submit" class="primary" disabled=pending>
                    {move || if pending.get() { "Signing in…" } else { "Sign in" }}
                </button>
            </ActionForm>
        </main>
    }
}
