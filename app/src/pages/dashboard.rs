//! The portal's front page: who you are, your group, its GPU quota.

use crate::{
    api::dashboard::dashboard,
    components::{next_steps::NextStepsCard, quota_gauge::QuotaGauge},
    use_session,
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn DashboardPage() -> impl IntoView {
    let me = use_session().0;
    // One resource and one Suspense for the whole page's data.
    let data = Resource::new(|| (), |_| dashboard());
    let account = move || {
        view! {
            <section class="card">
                <h2>"Account"</h2>
                <dl class="facts">
                    <dt>"User"</dt><dd data-testid="dash-user">{move || me.with(|m| m.as_ref().map(|m| m.username.clone()))}</dd>
                    <dt>"Role"</dt><dd>{move || me.with(|m| m.as_ref().map(|m| m.role.to_string()))}</dd>
                    <dt>"Group"</dt><dd data-testid="dash-group">{move || me.with(|m| m.as_ref().map(|m| m.group.clone()))}</dd>
                </dl>
            </section>
        }
    };
    view! {
        <Title text="Portal"/>
        <h1>"Welcome, " {move || me.with(|m| m.as_ref().map(|m| m.username.clone()))}</h1>
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
