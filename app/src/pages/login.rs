//! The sign-in page. A plain form: it works before the wasm loads and with
//! JavaScript off; with JavaScript it submits without a page load. Its
//! error box shows only the server's own answer: an error carried in the
//! URL (after a no-JS post) is signed by the server, and the server strips
//! one it did not sign.

use crate::{
    api::auth::Login,
    components::form_error::{error, FormError},
    signed_in,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Redirect, hooks::use_query_map};

mod oidc;

#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    let next = use_query_map().with_untracked(|q| q.get("next")).unwrap_or_default();
    // Already signed in: on to where the sign-in would have led.
    let onward = signed_in().map(|me| {
        let to = if me.must_change_password {
            crate::api::auth::CHANGE_PASSWORD_PAGE.to_string()
        } else {
            crate::api::auth::safe_next(Some(&next))
        };
        view! { <Redirect path=to/> }
    });
    // With a directory (`--ldap-url`) the same form takes its accounts too.
    let directory = crate::api::sso_admin::ldap().is_some().then(|| {
        view! { <p class="muted" data-testid="ldap-hint">"Use your directory account or a local one."</p> }
    });

    view! {
        <Title text="Sign in"/>
        {onward}
        <main class="login">
            <ActionForm action=login attr:class="card login-card">
                <h1>
                    <img src="/favicon.svg" alt="" width="32" height="32"/>
                    " Gantry"
                </h1>
                <p class="muted">"Sign in to your GPU workspace."</p>
                {directory}
                <label>
                    "Username"
                    <input type="text" name="username" autocomplete="username" required maxlength="64" autofocus/>
                </label>
                <label>
                    "Password"
                    <input type="password" name="password" autocomplete="current-password" required maxlength="256"/>
                </label>
                <input type="hidden" name="next" value=next/>
                <FormError message=error(login)/>
                <button type="submit" class="primary">"Sign in"</button>
                <oidc::OidcSignIn/>
            </ActionForm>
        </main>
    }
}
