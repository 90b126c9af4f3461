//! Terminal sessions: the open ones (who, which machine, from where, for
//! how long) with a button that closes one, and the recently closed ones
//! with how long they lasted and why they ended. Every open and close is
//! also in the audit log.

use crate::{
    api::terminals::{terminal_sessions, CloseTerminal},
    components::{
        form_error::{error, FormError},
        poll::busy_when,
        poll::poll,
    },
};
use gantry_core::time::format_utc;
use gantry_platform::workspace::sessions::SessionView;
use leptos::prelude::*;
use leptos_meta::Title;

fn duration(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[component]
pub fn TerminalsPage() -> impl IntoView {
    let close = ServerAction::<CloseTerminal>::new();
    let sessions = Resource::new(|| (), |_| terminal_sessions());
    view! {
        // While a close is on its way, look again soon.
        {poll(busy_when(sessions, |s| s.open.iter().any(|t| t.close_requested)))}
        <Title text="Terminals"/>
        <h1>"Terminal sessions"</h1>
        <FormError message=error(close)/>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || sessions.get().map(|r| match r {
                Ok(s) => {
                    let now = s.now;
                    let open = s.open;
                    let closed = s.closed;
                    view! {
                        <section class="card">
                            <h2>"Open"</h2>
                            {open.is_empty().then(|| view! { <p class="muted" data-testid="no-open-terminals">"No terminal is open."</p> })}
                            <table class="table" data-testid="open-terminals">
                                <thead><tr><th>"#"</th><th>"User"</th><th>"Machine"</th><th>"From"</th><th>"Opened (UTC)"</th><th>"Open for"</th><th></th></tr></thead>
                                <tbody>
                                    {open.into_iter().map(|t| view! { <OpenRow t=t now=now close=close/> }).collect_view()}
                                </tbody>
                            </table>
                        </section>
                        <section class="card">
                            <h2>"Recently closed"</h2>
                            <table class="table" data-testid="closed-terminals">
                                <thead><tr><th>"#"</th><th>"User"</th><th>"Machine"</th><th>"Opened (UTC)"</th><th>"Lasted"</th><th>"Why it closed"</th></tr></thead>
                                <tbody>
                                    {closed.into_iter().map(|t| {
                                        let lasted = duration(t.closed_at.unwrap_or(t.opened_at) - t.opened_at);
                                        view! {
                                            <tr data-testid="closed-terminal" data-id=t.id>
                                                <td>{t.id}</td>
                                                <td>{t.user}</td>
                                                <td><a href=format!("/machines/{}", t.machine_id)>{t.machine}</a></td>
                                                <td class="nowrap">{format_utc(t.opened_at)}</td>
                                                <td class="nowrap">{lasted}</td>
                                                <td>{t.close_reason}</td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                        </section>
                    }.into_any()
                }
                Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
            })}
        </Transition>
    }
}

#[component]
fn OpenRow(t: SessionView, now: i64, close: ServerAction<CloseTerminal>) -> impl IntoView {
    let closing = t.close_requested;
    view! {
        <tr data-testid="open-terminal" data-id=t.id data-user=t.user.clone()>
            <td>{t.id}</td>
            <td>{t.user.clone()}</td>
            <td><a href=format!("/machines/{}", t.machine_id)>{t.machine.clone()}</a></td>
            <td><code>{if t.client_addr.is_empty() { "—".to_string() } else { t.client_addr.clone() }}</code></td>
            <td class="nowrap">{format_utc(t.opened_at)}</td>
            <td class="nowrap">{duration(now - t.opened_at)}</td>
            <td>
                {if closing {
                    view! { <span class="muted small">"closing…"</span> }.into_any()
                } else {
                    view! {
                        <ActionForm action=close attr:data-testid="close-terminal">
                            <input type="hidden" name="session_id" value=t.id/>
                            <button type="submit" class="danger">"Close"</button>
                        </ActionForm>
                    }.into_any()
                }}
            </td>
        </tr>
    }
}
