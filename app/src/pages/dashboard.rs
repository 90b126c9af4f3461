//! The portal's front page: who you are, your group, its GPU quota.

use crate::{
    api::dashboard::dashboard,
    components::{next_steps::NextStepsCard, quota_gauge::QuotaGauge},
    signed_in,
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn DashboardPage() -> impl IntoView {
    let me = signed_in();
    let (user, role, group) = me.map(|m| (m.username, m.role.to_string(), m.group_name)).unwrap_or_default();
    let name = user.clone();
    // One resource and one Suspense for the whole page's data.
    let data = Resource::new(|| (), |_| dashboard());
    let account = move || {
        let (user, role, group) = (user.clone(), role.clone(), group.clone());
        view! {
            <section class="card">
                <h2>"Account"</h2>
                <dl class="facts">
                    <dt>"User"</dt><dd data-testid="dash-user">{user}</dd>
                    <dt>"Role"</dt><dd>{role}</dd>
                    <dt>"Group"</dt><dd data-testid="dash-group">{group}</dd>
                </dl>
            </section>
        }
    };
    view! {
        <Title text="Portal"/>
        <h1>"Welcome, " {name}</h1>
        <crate::pages::machines::reclaim::ReclaimBanner/>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || data.get().map(|r| match r {
                Ok(d) => view! {
                    <NextStepsCard steps=d.next/>
                    <div class="grid">
                        <section class="card">
                            <h2>"GPU quota"</h2>
                            <QuotaGauge quota=d.quota/>
                        </section>
                        {account()}
                    </div>
                }
                .into_any(),
                Err(e) => view! { <p class="form-error">{e.to_string()}</p> <div class="grid">{account()}</div> }.into_any(),
            })}
        </Suspense>
    }
}
