//! The document around every page, who it is rendered for, and the routes.

use crate::components::layout::{Frame, Layout};
use crate::pages::{
    admin,
    compute::{detail::ComputeTaskPage, ComputePage},
    dashboard::DashboardPage,
    datasets::DatasetsPage,
    login::LoginPage,
    machines::{detail::MachineDetailPage, MachinesPage},
    not_found::NotFound,
    tasks::TasksPage,
    tokens::TokensPage,
};
use gantry_platform::accounts::User;
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, Link, Meta, MetaTags, Title};
use leptos_router::{
    components::{ParentRoute, Route, Router, Routes},
    path, SsrMode,
};

/// The HTML document around the app; rendered only on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <AutoReload options=options.clone()/>
                <crate::components::asset_tags::AssetTags options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// Who is signed in, shared by every page: resolved on the server from the
/// request's session before the page renders.
#[derive(Clone)]
struct SignedIn(Option<User>);

/// The account this page is rendered for, if any.
pub fn signed_in() -> Option<User> {
    use_context::<SignedIn>().and_then(|s| s.0)
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(SignedIn(crate::state::request_user()));

    view! {
        <Title formatter=|page: String| if page.is_empty() { "Gantry".to_string() } else { format!("{page} · Gantry") }/>
        <Meta name="description" content="Gantry: self-service GPU dev machines, compute tasks and datasets"/>
        <Link rel="icon" type_="image/svg+xml" href="/favicon.svg"/>
        <Router>
            <AppRoutes/>
        </Router>
    }
}

/// Pages render with `SsrMode::Async`: the server waits for their data and
/// sends complete HTML, so they work without JavaScript and can set their
/// status code (403, 404).
///
/// Inside the router, so that actions made here see the error a no-JS form
/// post carried back in the URL.
///
/// The routes are type-erased here (`into_any`): every page's view type is
/// then compiled once, in this crate, instead of again inside the server
/// crate, whose debug build otherwise grows by gigabytes of type names.
#[component]
fn AppRoutes() -> impl IntoView {
    view! {
            <Routes fallback=|| view! { <Frame><NotFound/></Frame> }>
                <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async/>
                <ParentRoute path=path!("") view=Layout ssr=SsrMode::Async>
                    <Route path=path!("/") view=DashboardPage ssr=SsrMode::Async/>
                    <Route path=path!("/machines") view=MachinesPage ssr=SsrMode::Async/>
                    <Route path=path!("/machines/:id") view=MachineDetailPage ssr=SsrMode::Async/>
                    <Route path=path!("/compute") view=ComputePage ssr=SsrMode::Async/>
                    <Route path=path!("/compute/:id") view=ComputeTaskPage ssr=SsrMode::Async/>
                    <Route path=path!("/tasks") view=TasksPage ssr=SsrMode::Async/>
                    <Route path=path!("/datasets") view=DatasetsPage ssr=SsrMode::Async/>
                    <Route path=path!("/datasets/:code") view=crate::pages::datasets::DatasetPage ssr=SsrMode::Async/>
                    <Route path=path!("/datasets/:code/:version") view=crate::pages::datasets::DatasetVersionPage ssr=SsrMode::Async/>
                    <Route path=path!("/tokens") view=TokensPage ssr=SsrMode::Async/>
                    <Route path=path!("/api-docs") view=crate::pages::api_docs::ApiDocsPage ssr=SsrMode::Async/>
                    <Route path=path!("/snapshots") view=crate::pages::machines::snapshots::SnapshotsPage ssr=SsrMode::Async/>
                    <Route path=path!("/account/password") view=crate::pages::account::ChangePasswordPage ssr=SsrMode::Async/>
                    <Route path=path!("/notifications") view=crate::pages::notifications::NotificationsPage ssr=SsrMode::Async/>
                    <Route path=path!("/account/notifications") view=crate::pages::notification_settings::NotificationSettingsPage ssr=SsrMode::Async/>
                    <ParentRoute path=path!("/admin") view=admin::AdminLayout ssr=SsrMode::Async>
                        <Route path=path!("") view=admin::users::UsersPage ssr=SsrMode::Async/>
                        <Route path=path!("/groups") view=admin::groups::GroupsPage ssr=SsrMode::Async/>
                        <Route path=path!("/nodes") view=admin::nodes::NodesPage ssr=SsrMode::Async/>
                        <Route path=path!("/nodes/:id") view=admin::node_detail::NodeDetailPage ssr=SsrMode::Async/>
                        <Route path=path!("/overview") view=admin::overview::OverviewPage ssr=SsrMode::Async/>
                        <Route path=path!("/images") view=admin::images::ImagesPage ssr=SsrMode::Async/>
                        <Route path=path!("/regions") view=admin::regions::RegionsPage ssr=SsrMode::Async/>
                        <Route path=path!("/region-images") view=admin::region_images::RegionImagesPage ssr=SsrMode::Async/>
                        <Route path=path!("/catalogue") view=admin::catalogue::CataloguePage ssr=SsrMode::Async/>
                        <Route path=path!("/terminals") view=admin::terminals::TerminalsPage ssr=SsrMode::Async/>
                        <Route path=path!("/reclaim") view=admin::reclaim::ReclaimPage ssr=SsrMode::Async/>
                        <Route path=path!("/sign-in") view=admin::sign_in::SignInPage ssr=SsrMode::Async/>
                        <Route path=path!("/audit") view=admin::audit::AuditPage ssr=SsrMode::Async/>
                    </ParentRoute>
                </ParentRoute>
            </Routes>
    }
    .into_any()
}
