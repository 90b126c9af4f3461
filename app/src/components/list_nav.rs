//! The parts every long list shares: the filter form (a plain GET form, so
//! it works without JavaScript), the per-state links with counts, and the
//! pager. All links keep the other filters.

use crate::{
    model::lists::{ListCounts, ListQuery},
    signed_in,
};
use gantry_core::paging::{page_span, PageSpan};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// The list query from the page's URL (kept in step on client navigation).
pub fn use_list_query() -> Memo<ListQuery> {
    let map = use_query_map();
    Memo::new(move |_| {
        map.with(|m| ListQuery {
            state: m.get("state"),
            user: m.get("user"),
            group: m.get("group"),
            kind: m.get("kind"),
            page: m.get("page"),
        })
    })
}

/// Owner/group text filters (group for admins only) and, for tasks, the
/// kind; the state is kept in a hidden field and chosen by the links.
#[component]
pub fn FilterForm(
    base: &'static str,
    query: ListQuery,
    #[prop(optional)] kinds: Option<Vec<&'static str>>,
    user_label: &'static str,
) -> impl IntoView {
    let admin = signed_in().is_some_and(|m| m.is_admin());
    let kind_select = kinds.map(|kinds| {
        let chosen = query.kind.clone().unwrap_or_default();
        view! {
            <label>"Kind "
                <select name="kind" data-testid="filter-kind">
                    <option value="" selected=chosen.is_empty()>"any"</option>
                    {kinds.into_iter().map(|k| view! { <option value=k selected=chosen == k>{k}</option> }).collect_view()}
                </select>
            </label>
        }
    });
    view! {
        <form method="get" action=base class="list-filters" data-testid="list-filters">
            <input type="hidden" name="state" value=query.state.clone().unwrap_or_default()/>
            <label>{user_label} " " <input name="user" size="12" value=query.user.clone().unwrap_or_default() data-testid="filter-user"/></label>
            {admin.then(|| view! { <label>"Group " <input name="group" size="12" value=query.group.clone().unwrap_or_default() data-testid="filter-group"/></label> })}
            {kind_select}
            <button type="submit" class="secondary">"Filter"</button>
            <a href=base>"Clear"</a>
        </form>
    }
}

/// "all 120 · running 80 · stopped 40": one link per state present.
#[component]
pub fn StateLinks(base: &'static str, query: ListQuery, counts: ListCounts) -> impl IntoView {
    let all: i64 = counts.by_state.iter().map(|(_, n)| n).sum();
    let current = query.state.clone().unwrap_or_default();
    let link = move |label: String, state: Option<String>, n: i64| {
        let active = state.clone().unwrap_or_default() == current;
        let href = query.href(base, Some(state.as_deref()), None);
        view! {
            <a href=href class:active=active aria-current=active.then_some("true") data-testid="state-link" data-filter-state=state.unwrap_or_default()>
                {label} " " <span class="count">{n}</span>
            </a>
        }
    };
    view! {
        <nav class="state-links" aria-label="Filter by state">
            {link("all".into(), None, all)}
            {counts.by_state.iter().map(|(s, n)| link(s.clone(), Some(s.clone()), *n)).collect_view()}
        </nav>
    }
}

/// Whether the page asked for lies past the list's end (an old link, or
/// rows deleted since): it has no rows, yet the list may well have some,
/// so a page shows the pager's note instead of its "nothing yet".
pub fn past_end(counts: &ListCounts) -> bool {
    matches!(page_span(counts.total, counts.page, counts.per_page), PageSpan::PastEnd { .. })
}

/// "Showing 51–100 of 230 · ‹ Previous · page 2 of 5 · Next ›"; past the
/// end, "Page 7 is past the end of this list (230 in all) · go to page 5".
#[component]
pub fn Pager(base: &'static str, query: ListQuery, counts: ListCounts) -> impl IntoView {
    let (first, last) = match page_span(counts.total, counts.page, counts.per_page) {
        PageSpan::Rows { first, last } => (first, last),
        PageSpan::PastEnd { last_page } => {
            let back = query.href(base, None, Some(last_page));
            return view! {
                <p class="pager muted small" data-testid="pager" data-total=counts.total>
                    "Page " {counts.page} " is past the end of this list (" {counts.total} " in all) · "
                    <a href=back data-testid="pager-back">{format!("go to page {last_page}")}</a>
                </p>
            }
            .into_any();
        }
    };
    let prev = (counts.page > 1).then(|| query.href(base, None, Some(counts.page - 1)));
    let next = (counts.page < counts.pages).then(|| query.href(base, None, Some(counts.page + 1)));
    view! {
        <p class="pager muted small" data-testid="pager" data-total=counts.total>
            "Showing " {first} "–" {last} " of " {counts.total}
            {prev.map(|h| view! { " · " <a href=h rel="prev">"‹ Previous"</a> })}
            " · page " {counts.page} " of " {counts.pages}
            {next.map(|h| view! { " · " <a href=h rel="next">"Next ›"</a> })}
        </p>
    }
    .into_any()
}
