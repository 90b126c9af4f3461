//! The account's notification channels: the portal always; email to an
//! address and a webhook to a URL, each for the kinds ticked. The webhook's
//! signing secret is shown once, when it is made (first URL saved, or
//! "New secret"), and how to check a signature is said next to it.

use crate::api::notifications::{
    my_notification_settings, take_webhook_secret, RegenerateWebhookSecret, SaveNotificationSettings,
};
use crate::components::form_error::{error, FormError};
use gantry_platform::notifications::{Kind, NotificationSettings};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotificationSettingsPage() -> impl IntoView {
    let save = ServerAction::<SaveNotificationSettings>::new();
    let regenerate = ServerAction::<RegenerateWebhookSecret>::new();
    let current =
        Resource::new(move || (save.version().get(), regenerate.version().get()), |_| my_notification_settings());
    let flashed = Resource::new(|| (), |_| take_webhook_secret());
    let secret = move || {
        crate::components::flash::answer(save)
            .and_then(|s| s.secret)
            .or_else(|| crate::components::flash::answer(regenerate))
            .or_else(|| flashed.get().and_then(Result::ok).flatten())
    };
    view! {
        <Title text="Notification settings"/>
        <h1>"Notification settings"</h1>
        <section class="card stack narrow">
            <p class="muted small">
                "Every notification is listed on " <a href="/notifications">"Notifications"</a>
                ". Choose which kinds also go by email and to a webhook. A reclaim warning is queued for your channels in the same moment the warning is given, always before the machine can be reclaimed."
            </p>
            <Suspense fallback=|| ()>
                {move || secret().map(|s| view! {
                    <div class="notice stack" role="status" data-testid="new-webhook-secret">
                        <p><strong>"Your webhook secret."</strong> " Copy it now: it is not shown again."</p>
                        <input type="text" readonly class="secret" aria-label="Webhook secret" value=s data-select-all=""/>
                        <p class="muted small">"Each POST carries X-Gantry-Signature: sha256=HEX, the HMAC-SHA256 of the exact body with this secret, and X-Gantry-Delivery (the same on every retry)."</p>
                    </div>
                })}
            </Suspense>
            <FormError message=error(save)/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || current.get().map(|r| match r {
                    Ok(s) => view! { <SettingsForm current=s save=save/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
            <FormError message=error(regenerate)/>
            <ActionForm action=regenerate attr:class="inline" attr:data-testid="regenerate-secret">
                <button type="submit">"New webhook secret"</button>
            </ActionForm>
        </section>
    }
}

#[component]
fn SettingsForm(current: NotificationSettings, save: ServerAction<SaveNotificationSettings>) -> impl IntoView {
    let checks = |field: &'static str, chosen: Vec<Kind>, testid: &'static str| {
        view! {
            <fieldset data-testid=testid>
                <legend>"Kinds"</legend>
                {Kind::ALL.into_iter().map(|k| view! {
                    <label class="check">
                        <input type="checkbox" name=field value=k.as_str() checked=chosen.contains(&k)/>
                        {k.label()}
                    </label>
                }).collect_view()}
            </fieldset>
        }
    };
    view! {
        <ActionForm action=save attr:class="stack" attr:data-testid="notification-settings">
            <h2>"Email"</h2>
            <label>"Address (empty: no email)"
                <input type="email" name="email" maxlength="254" autocomplete="email" value=current.email.clone().unwrap_or_default()/>
            </label>
            {checks("email_kinds[]", current.email_kinds.clone(), "email-kinds")}
            <h2>"Webhook"</h2>
            <label>"URL, http:// or https:// (empty: no webhook)"
                <input type="url" name="webhook_url" maxlength="2000" value=current.webhook_url.clone().unwrap_or_default()/>
            </label>
            <p class="muted small" data-testid="webhook-secret-state">
                {if current.has_webhook_secret { "A signing secret is set (shown only when made)." } else { "A signing secret is made when you first save a URL." }}
            </p>
            {checks("webhook_kinds[]", current.webhook_kinds.clone(), "webhook-kinds")}
            <button type="submit" class="primary">"Save"</button>
        </ActionForm>
    }
}
