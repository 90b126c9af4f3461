//! The signed-in user's own account: change the password. An account whose
//! password an admin reset lands here first and cannot go on until it has
//! chosen its own (the server enforces that; this page explains it).

use crate::{
    api::auth::ChangePassword,
    components::form_error::{error_text, FormError},
    use_session,
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ChangePasswordPage() -> impl IntoView {
    let change = ServerAction::<ChangePassword>::new();
    let me = use_session().0;
    Effect::new(move |_| {
        if let Some(Ok(user)) = change.value().get() {
            me.set(Some(user));
        }
    });
    let forced = move || me.with(|m| m.as_ref().is_some_and(|m| m.must_change_password));
    // The form came back with its answer (signed in the redirect).
    let changed = move || crate::components::nojs_done::answer(change).is_some();
    let pending = change.pending();
    view! {
        <Title text="Change password"/>
        <h1>"Change password"</h1>
        <section class="card stack narrow">
            <Show when=forced>
                <p class="notice" data-testid="must-change">
                    "An administrator set a temporary password for your account. Choose your own password to continue."
                </p>
            </Show>
            <Show when=changed>
                <p class="form-ok" role="status" data-testid="password-changed">
                    "Your password is changed. Your other sessions were signed out. " <a href="/">"Go to the portal"</a>
                </p>
            </Show>
            <ActionForm action=change attr:class="stack" attr:data-testid="change-password">
                <label>"Current password"
                    <input type="password" name="current" required maxlength="256" autocomplete="current-password"/>
                </label>
                <label>"New password"
                    <input type="password" name="new" required minlength="8" maxlength="256" autocomplete="new-password"/>
                </label>
                <label>"New password again"
                    <input type="password" name="repeat" required minlength="8" maxlength="256" autocomplete="new-password"/>
                </label>
                <FormError message=Signal::derive(move || change.value().with(error_text))/>
                <button type="submit" class="primary" disabled=pending>"Change password"</button>
            </ActionForm>
        </section>
    }
}
