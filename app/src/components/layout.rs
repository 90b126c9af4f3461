//! The frame around every signed-in page: brand, navigation, account menu.

use crate::{api::auth::Logout, components::flash::FlashDone, signed_in};
use leptos::prelude::*;
use leptos_router::components::{Outlet, Redirect, A};

/// The unread notifications' count next to the navigation's link (none
/// when there are none, or nobody is signed in).
fn unread_badge() -> impl IntoView {
    let unread = Resource::new(|| (), |_| crate::api::notifications::unread_notifications());
    view! {
        <Suspense fallback=|| ()>
            {move || unread.get().and_then(Result::ok).filter(|n| *n > 0).map(|n| view! {
                " "<span class="badge" data-testid="unread-count" aria-label=format!("{n} unread")>{n}</span>
            })}
        </Suspense>
    }
}

/// The frame for nested routes.
#[component]
pub fn Layout() -> impl IntoView {
    view! { <Frame><Outlet/></Frame> }
}

#[component]
pub fn Frame(children: Children) -> impl IntoView {
    let me = signed_in();
    let logout = ServerAction::<Logout>::new();
    let is_admin = me.as_ref().is_some_and(|m| m.is_admin());
    let signed_out = me.is_none();

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
                <A href="/notifications">"Notifications"{unread_badge()}</A>
                {is_admin.then(|| view! { <A href="/admin">"Admin"</A> })}
            </nav>
            {me.map(|me| view! {
                <div class="account">
                    <span class="who" data-testid="whoami">
                        {me.username}
                        <small>{format!(" · {}", me.group_name)}</small>
                    </span>
                    <a href="/account/password" class="small" data-testid="account-link">"Password"</a>
                    <ActionForm action=logout>
                        <button type="submit" class="link">"Sign out"</button>
                    </ActionForm>
                </div>
            })}
        </header>
        // The server's page guard sends signed-out requests to the sign-in
        // page before they render; this is its last line.
        {signed_out.then(|| view! { <Redirect path="/login"/> })}
        <main class="content"><FlashDone/>{children()}</main>
    }
}
