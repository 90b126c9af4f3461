//! The signed-in user's own account: change the password. An account whose
//! password an admin reset lands here first and cannot go on until it has
//! chosen its own (the server enforces that; this page explains it).

use crate::{
    api::auth::ChangePassword,
    components::form_error::{error, FormError},
    signed_in,
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ChangePasswordPage() -> impl IntoView {
    let change = ServerAction::<ChangePassword>::new();
    let forced = signed_in().is_some_and(|m| m.must_change_password);
    // The form came back with its answer (signed in the redirect).
    let changed = crate::components::flash::answer(change).is_some();
    view! {
        <Title text="Change password"/>
        <h1>"Change password"</h1>
        <p class="small"><a href="/account/notifications" data-testid="notification-settings-link">"Notification settings: email and webhook"</a></p>
        <section class="card stack narrow">
            {forced.then(|| view! {
                <p class="notice" data-testid="must-change">
                    "An administrator set a temporary password for your account. Choose your own password to continue."
                </p>
            })}
            {changed.then(|| view! {
                <p class="form-ok" role="status" data-testid="password-changed">
                    "Your password is changed. Your other sessions were signed out and your API tokens revoked. " <a href="/">"Go to the portal"</a>
                </p>
            })}
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
                <FormError message=error(change)/>
                <button type="submit" class="primary">"Change password"</button>
            </ActionForm>
        </section>
        {(!forced).then(|| view! { <crate::pages::account_ssh_keys::SshKeysSection/> })}
        {(!forced).then(|| view! { <crate::pages::machines::time_zone::TimeZoneCard/> })}
    }
}
