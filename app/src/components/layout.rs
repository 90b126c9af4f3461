//! The frame around every signed-in page: brand, navigation, account menu.

use crate::{api::auth::Logout, components::nojs_done::NoJsDone, use_session};
use leptos::prelude::*;
use leptos_router::components::{Outlet, Redirect, A};

/// The frame for nested routes.
#[component]
pub fn Layout() -> impl IntoView {
    view! { <Frame><Outlet/></Frame> }
}

#[component]
pub fn Frame(children: Children) -> impl IntoView {
    let me = use_session().0;
    let logout = ServerAction::<Logout>::new();
    Effect::new(move |_| {
        if let Some(Ok(())) = logout.value().get() {
            me.set(None);
        }
    });
    let is_admin = move || me.with(|m| m.as_ref().is_some_and(|m| m.is_admin()));

    view! {
        <header class="topbar">
            <a class="brand" href="/">
                <img src="/favicon.svg" alt="" width="24" height="24"/>
                <span>"Gantry"</span>
            </a>
            <nav class="mainnav" aria-label="Main">
                <A href="/" exact=true>"Portal"</A>
                <A href="/machines">"Machines"</A>
                <A href="/snapshots">"Snapshots"</A>
                <A href="/compute">"Compute"</A>
                <A href="/tasks">"Tasks"</A>
                <A href="/datasets">"Datasets"</A>
                <A href="/tokens">"Tokens"</A>
                <Show when=is_admin>
                    <A href="/admin">"Admin"</A>
                </Show>
            </nav>
            <Show when=move || me.with(Option::is_some)>
                <div class="account">
                    <span class="who" data-testid="whoami">
                        {move || me.with(|m| m.as_ref().map(|m| m.username.clone()))}
                        <small>{move || me.with(|m| m.as_ref().map(|m| format!(" · {}", m.group)))}</small>
                    </span>
                    <a href="/account/password" class="small" data-testid="account-link">"Password"</a>
                    <ActionForm action=logout>
                        <button type="submit" class="link">"Sign out"</button>
                    </ActionForm>
                </div>
            </Show>
        </header>
        // A page reached by client-side navigation after signing out.
        <Show when=move || me.with(Option::is_none)>
            <Redirect path="/login"/>
        </Show>
        <main class="content"><NoJsDone/>{children()}</main>
    }
}
