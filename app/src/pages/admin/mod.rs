//! The admin console. The server refuses admin server functions to
//! non-admins (403) and answers admin pages with 403 before they render;
//! this layout is the same rule's last line.

pub mod audit;
pub mod catalogue;
pub mod dataset_quotas;
pub mod groups;
pub mod images;
pub mod node_detail;
pub mod nodes;
pub mod overview;
pub mod reclaim;
pub mod region_images;
pub mod regions;
pub mod sign_in;
pub mod terminals;
pub mod users;

use crate::signed_in;
use leptos::prelude::*;
use leptos_router::components::{Outlet, A};

#[component]
pub fn AdminLayout() -> impl IntoView {
    let is_admin = signed_in().is_some_and(|m| m.is_admin());
    view! {
        <Show when=move || is_admin fallback=Forbidden>
            <nav class="subnav" aria-label="Admin">
                <A href="/admin" exact=true>"Users"</A>
                <A href="/admin/groups">"Groups"</A>
                <A href="/admin/overview">"Overview"</A>
                <A href="/admin/nodes">"Nodes"</A>
                <A href="/admin/images">"Images"</A>
                <A href="/admin/regions">"Regions"</A>
                <A href="/admin/region-images">"Region images"</A>
                <A href="/admin/catalogue">"Catalogue"</A>
                <A href="/admin/terminals">"Terminals"</A>
                <A href="/admin/reclaim">"Reclaim"</A>
                <A href="/admin/sign-in">"Sign-in"</A>
                <A href="/admin/audit">"Audit log"</A>
            </nav>
            <Outlet/>
        </Show>
    }
}

#[component]
fn Forbidden() -> impl IntoView {
    view! {
        <section class="card empty" data-testid="forbidden">
            <h1>"Administrators only"</h1>
            <p class="muted">"Your account cannot open the admin console."</p>
        </section>
    }
}
