//! The portal's front page: who you are, your group, its GPU quota.

use crate::{
    api::dashboard::my_quota,
    components::{next_steps::NextStepsCard, quota_gauge::QuotaGauge},
    use_session,
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn DashboardPage() -> impl IntoView {
    let me = use_session().0;
    let quota = Resource::new(|| (), |_| my_quota());
    view! {
        <Title text="Portal"/>
        <h1>"Welcome, " {move || me.with(|m| m.as_ref().map(|m| m.username.clone()))}</h1>
        <crate::pages::machines::reclaim::ReclaimBanner/>
        <NextStepsCard/>
        <div class="grid">
            <section class="card">
                <h2>"GPU quota"</h2>
                <Suspense fallback=|| view! { <p class="muted">"Loading quota…"</p> }>
                    {move || quota.get().map(|q| match q {
                        Ok(q) => view! { <QuotaGauge quota=q/> }.into_any(),
                        Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                    })}
                </Suspense>
            </section>
            <section class="card">
                <h2>"Account"</h2>
                <dl class="facts">
                    <dt>"User"</dt><dd data-testid="dash-user">{move || me.with(|m| m.as_ref().map(|m| m.username.clone()))}</dd>
                    <dt>"Role"</dt><dd>{move || me.with(|m| m.as_ref().map(|m| m.role.to_string()))}</dd>
                    <dt>"Group"</dt><dd data-testid="dash-group">{move || me.with(|m| m.as_ref().map(|m| m.group.clone()))}</dd>
                </dl>
            </section>
        </div>
    }
}
