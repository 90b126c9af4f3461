//! The audit log: who changed what, newest first.

use crate::api::admin::recent_audit;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn AuditPage() -> impl IntoView {
    let rows = Resource::new(|| (), |_| recent_audit());
    view! {
        <Title text="Audit log"/>
        <h1>"Audit log"</h1>
        <section class="card">
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || rows.get().map(|r| match r {
                    Ok(list) => view! {
                        <table class="table" data-testid="audit">
                            <thead><tr><th>"When (UTC)"</th><th>"Who"</th><th>"What"</th><th>"Detail"</th></tr></thead>
                            <tbody>
                                {list.into_iter().map(|a| view! {
                                    <tr>
                                        <td class="nowrap">{gantry_core::time::format_utc(a.at)}</td>
                                        <td>{a.actor.unwrap_or_else(|| "system".into())}</td>
                                        <td><code>{a.action}</code></td>
                                        <td>{a.detail}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Suspense>
        </section>
    }
}
