//! The signed-in user's notifications, newest first, unread ones marked,
//! with "mark read" and "mark all read" (plain forms: they work without
//! JavaScript); below, every email and webhook delivery with each attempt,
//! its answer or error, and when it is tried next.

use crate::api::notifications::{my_deliveries, my_notifications, MarkAllNotificationsRead, MarkNotificationRead};
use crate::components::form_error::{error, FormError};
use gantry_core::time::format_utc;
use gantry_platform::notifications::{DeliveryView, NotificationView};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn NotificationsPage() -> impl IntoView {
    let mark = ServerAction::<MarkNotificationRead>::new();
    let mark_all = ServerAction::<MarkAllNotificationsRead>::new();
    let query = use_query_map();
    let page = Memo::new(move |_| query.with(|q| q.get("page")));
    let list = Resource::new(
        move || (page.get(), mark.version().get(), mark_all.version().get()),
        |(page, _, _)| my_notifications(page),
    );
    let deliveries = Resource::new(|| (), |_| my_deliveries());
    view! {
        <Title text="Notifications"/>
        <h1>"Notifications"</h1>
        <section class="card stack">
            <p class="muted small">
                "Reclaim warnings, stops, compute tasks that ended and quota changes. They are always listed here; "
                <a href="/account/notifications" data-testid="notification-settings-link">"choose which also go by email or webhook"</a>"."
            </p>
            <FormError message=error(mark)/>
            <FormError message=error(mark_all)/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || list.get().map(|r| match r {
                    Ok(p) => view! {
                        <p data-testid="unread-summary">{format!("{} unread of {}", p.unread, p.total)}</p>
                        {(p.unread > 0).then(|| view! {
                            <ActionForm action=mark_all attr:class="inline" attr:data-testid="mark-all-read">
                                <button type="submit">"Mark all read"</button>
                            </ActionForm>
                        })}
                        <NotificationList items=p.items.clone() mark=mark/>
                        <nav class="pager" aria-label="Pages">
                            {(p.page > 1).then(|| view! { <a href=format!("/notifications?page={}", p.page - 1)>"Newer"</a> })}
                            {(p.page * p.per_page < p.total).then(|| view! { <a href=format!("/notifications?page={}", p.page + 1)>"Older"</a> })}
                        </nav>
                    }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
        <section class="card stack">
            <h2>"Email and webhook deliveries"</h2>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || deliveries.get().map(|r| match r {
                    Ok(list) => view! { <DeliveryTable deliveries=list/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn NotificationList(items: Vec<NotificationView>, mark: ServerAction<MarkNotificationRead>) -> impl IntoView {
    if items.is_empty() {
        return view! { <p class="muted" data-testid="no-notifications">"No notifications yet."</p> }.into_any();
    }
    view! {
        <ul class="stack plain" data-testid="notifications">
            {items.into_iter().map(|n| {
                let unread = n.read_at.is_none();
                let label = n.kind_label();
                view! {
                    <li class="card" data-testid="notification" data-id=n.id data-kind=n.kind.clone() data-state=if unread { "unread" } else { "read" }>
                        <p>
                            {unread.then(|| view! { <span class="badge" data-testid="unread">"unread"</span>" " })}
                            <strong>{n.subject.clone()}</strong>
                        </p>
                        <p class="muted small">{format!("{label} · {} UTC", format_utc(n.created_at))}</p>
                        <p>{n.body.clone()}</p>
                        {unread.then(|| view! {
                            <ActionForm action=mark attr:class="inline">
                                <input type="hidden" name="notification_id" value=n.id/>
                                <button type="submit" class="link" aria-label=format!("Mark read: {}", n.subject)>"Mark read"</button>
                            </ActionForm>
                        })}
                    </li>
                }
            }).collect_view()}
        </ul>
    }
    .into_any()
}

#[component]
fn DeliveryTable(deliveries: Vec<DeliveryView>) -> impl IntoView {
    if deliveries.is_empty() {
        return view! { <p class="muted" data-testid="no-deliveries">"Nothing sent by email or webhook yet."</p> }
            .into_any();
    }
    view! {
        <table class="table" data-testid="deliveries">
            <thead><tr><th>"Notification"</th><th>"Channel"</th><th>"State"</th><th>"Attempts"</th><th>"Next try (UTC)"</th></tr></thead>
            <tbody>
                {deliveries.into_iter().map(|d| {
                    let tries = d.tries.iter().map(|a| {
                        let answer = match (a.ok, a.status_code, &a.error) {
                            (true, Some(code), _) => format!("sent (HTTP {code})"),
                            (true, None, _) => "sent".to_string(),
                            (false, _, Some(e)) => format!("failed: {e}"),
                            (false, Some(code), None) => format!("failed: HTTP {code}"),
                            (false, None, None) => "failed".to_string(),
                        };
                        view! { <li data-testid="attempt">{format!("#{} at {} UTC: {answer}", a.attempt, format_utc(a.at))}</li> }
                    }).collect_view();
                    let next = d.next_attempt_at.map(format_utc).unwrap_or_else(|| "—".into());
                    view! {
                        <tr data-testid="delivery" data-state=d.state.clone() data-channel=d.channel.clone()>
                            <td>{d.subject.clone()}</td>
                            <td>{format!("{} to {}", d.channel, d.target)}</td>
                            <td>{d.state.clone()}</td>
                            <td><ul class="plain small">{tries}</ul></td>
                            <td class="nowrap">{next}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
