//! The audit log: who changed what, newest first, filtered by actor, action
//! and days, one page at a time. The filters are a plain GET form, so a
//! filtered page is a link that works with JavaScript off too.

use crate::{
    api::admin::{audit_page, AUDIT_BEFORE_INVALID},
    error::AppError,
};
use gantry_platform::accounts::AuditPage;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{components::Form, hooks::use_query_map};

const FILTERS: [&str; 4] = ["actor", "action", "since", "until"];

/// The query string of the current filters, with `before` for a page.
fn query(filters: &[(String, String)], before: Option<i64>) -> String {
    let mut pairs: Vec<String> =
        filters.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}={}", encode(v))).collect();
    if let Some(b) = before {
        pairs.push(format!("before={b}"));
    }
    if pairs.is_empty() {
        "/admin/audit".into()
    } else {
        format!("/admin/audit?{}", pairs.join("&"))
    }
}

use gantry_core::url::encode;

#[component]
pub fn AuditPage() -> impl IntoView {
    let q = use_query_map();
    let filters =
        Memo::new(move |_| q.with(|q| FILTERS.map(|k| (k.to_string(), q.get(k).unwrap_or_default())).to_vec()));
    let before = Memo::new(move |_| q.with(|q| q.get("before")));
    let rows = Resource::new(
        move || (filters.get(), before.get()),
        |(f, before)| async move {
            let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).filter(|v| !v.is_empty());
            // A `before` that is not a number is refused here, with the
            // words the server refuses one below 1 with: an error, never
            // an empty log.
            let before = match before.map(|b| b.trim().parse::<i64>()) {
                None => None,
                Some(Ok(b)) => Some(b),
                Some(Err(_)) => return Err(AppError::Invalid(AUDIT_BEFORE_INVALID.into())),
            };
            audit_page(get("actor"), get("action"), get("since"), get("until"), before).await
        },
    );
    let value = move |k: &'static str| {
        filters.with(|f| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default())
    };
    view! {
        <Title text="Audit log"/>
        <h1>"Audit log"</h1>
        <section class="card stack">
            <Form method="GET" action="/admin/audit" attr:class="audit-filters" attr:data-testid="audit-filters">
                <label>"Who" <input type="text" name="actor" maxlength="64" placeholder="username or system" value=move || value("actor")/></label>
                <label>"Action" <input type="text" name="action" maxlength="64" placeholder="e.g. user.disable or user." value=move || value("action")/></label>
                <label>"From (UTC)" <input type="date" name="since" value=move || value("since")/></label>
                <label>"To (UTC)" <input type="date" name="until" value=move || value("until")/></label>
                <button type="submit">"Filter"</button>
                <a href="/admin/audit">"Clear"</a>
            </Form>
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || rows.get().map(|r| match r {
                    Ok(page) => view! { <AuditTable page=page filters=filters.get() first=before.get().is_none()/> }.into_any(),
                    Err(e) => view! { <p class="form-error" data-testid="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn AuditTable(page: AuditPage, filters: Vec<(String, String)>, first: bool) -> impl IntoView {
    if page.rows.is_empty() {
        return view! { <p class="muted" data-testid="audit-empty">"Nothing in the log matches."</p> }.into_any();
    }
    let newer = (!first).then(|| view! { <a href=query(&filters, None)>"Newest"</a> });
    let older =
        page.next_before.map(|b| view! { <a href=query(&filters, Some(b)) data-testid="audit-older">"Older →"</a> });
    view! {
        <table class="table" data-testid="audit">
            <thead><tr><th>"When (UTC)"</th><th>"Who"</th><th>"What"</th><th>"Detail"</th></tr></thead>
            <tbody>
                {page.rows.into_iter().map(|a| {
                    let action = a.action.clone();
                    view! {
                    <tr data-testid="audit-row" data-action=action>
                        <td class="nowrap">{gantry_core::time::format_utc(a.at)}</td>
                        <td>{a.actor.unwrap_or_else(|| gantry_core::validate::SYSTEM_ACTOR.into())}</td>
                        <td><code>{a.action}</code></td>
                        <td>{a.detail}</td>
                    </tr>
                }}).collect_view()}
            </tbody>
        </table>
        <p class="actions">{newer} {older}</p>
    }
    .into_any()
}
