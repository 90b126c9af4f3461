//! Personal API tokens for scripts (`/api/v1/...`): make one (with the
//! account's password; its secret is shown once, here), see which exist,
//! when they expire and when they were last used, and revoke them. A token
//! acts as its owner, with the owner's group, within its scope (read, write
//! or — for administrators — admin), chosen here.

use crate::{
    api::tokens::{my_tokens, take_new_token, CreateToken, CreatedToken, RevokeToken},
    components::{
        confirm::tick_to_confirm,
        form_error::{error, FormError},
    },
    model::tokens::{curl_example, last_used_label, state_label},
};
use gantry_platform::tokens::TokenView;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn TokensPage() -> impl IntoView {
    let create = ServerAction::<CreateToken>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let tokens = Resource::new(move || (create.version().get(), revoke.version().get()), |_| my_tokens());
    // A second click while the first create runs would make a second token
    // whose secret is never shown.
    // A token made by a form post without JavaScript, handed over once.
    let flashed = Resource::new(|| (), |_| take_new_token());
    // Only administrators are offered admin tokens (the server refuses
    // them to anyone else whatever the form sends).
    let is_admin = crate::shell::signed_in().is_some_and(|m| m.is_admin());
    let created =
        move || crate::components::flash::answer(create).or_else(|| flashed.get().and_then(Result::ok).flatten());
    view! {
        <Title text="API tokens"/>
        <h1>"API tokens"</h1>
        <div class="grid two">
            <section class="card">
                <h2>"New token"</h2>
                <ActionForm action=create attr:class="stack" attr:data-testid="create-token">
                    <label>"Name" <input type="text" name="name" required maxlength="64" autocomplete="off" placeholder="e.g. laptop scripts"/></label>
                    <label>"Your password" <input type="password" name="password" required maxlength="256" autocomplete="current-password"/></label>
                    <label>"Scope"
                        <select name="scope" data-testid="token-scope">
                            <option value="read">"read: look only (GET)"</option>
                            <option value="write" selected>"write: everything you may do, but the admin console"</option>
                            {is_admin.then(|| view! { <option value="admin">"admin: also the admin console"</option> })}
                        </select>
                    </label>
                    <p class="muted small">"A token acts as you, within its scope: it can manage your machines and compute tasks and use datasets through the API. It expires after a while (see the list), and changing your password revokes it, as do an administrator's changes to your account. Revoke it when it is no longer needed."</p>
                    <p class="small"><a href="/api-docs">"What the API offers"</a></p>
                    <FormError message=error(create)/>
                    <button type="submit" class="primary">"Create token"</button>
                </ActionForm>
                <Suspense fallback=|| ()>
                    {move || created().map(|c| view! { <NewToken created=c/> })}
                </Suspense>
            </section>
            <section class="card stack">
                <h2>"Your tokens"</h2>
                <FormError message=error(revoke)/>
                <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || tokens.get().map(|r| match r {
                        Ok(list) => view! { <TokenTable tokens=list revoke=revoke/> }.into_any(),
                        Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                    })}
                </Transition>
            </section>
        </div>
    }
}

/// The secret, once, with how to copy and use it.
#[component]
fn NewToken(created: CreatedToken) -> impl IntoView {
    let curl = curl_example(&created.secret);
    view! {
        <div class="notice stack" role="status" data-testid="new-token">
            <p><strong>"Token " {created.token.name.clone()} " created."</strong> " Copy it now: it is not shown again."</p>
            <input type="text" readonly class="secret" aria-label="New token" value=created.secret data-testid="token-secret" data-select-all=""/>
            <p class="muted small">"Select the field and copy it (Ctrl+C, or ⌘C). Use it like this:"</p>
            <pre class="output small">{curl}</pre>
        </div>
    }
}

#[component]
fn TokenTable(tokens: Vec<TokenView>, revoke: ServerAction<RevokeToken>) -> impl IntoView {
    if tokens.is_empty() {
        return view! { <p class="muted" data-testid="no-tokens">"No tokens yet."</p> }.into_any();
    }
    view! {
        <table class="table" data-testid="tokens">
            <thead><tr><th>"Name"</th><th>"Starts with"</th><th>"Scope"</th><th>"Created (UTC)"</th><th>"Expires (UTC)"</th><th>"Last used (UTC)"</th><th>"State"</th><th></th></tr></thead>
            <tbody>
                {tokens.into_iter().map(|t| {
                    let revoked = t.revoked_at.is_some();
                    let label = format!("Revoke token {}", t.name);
                    let question = format!("Revoke token {}? Scripts that use it stop working at once; this cannot be undone.", t.name);
                    let (data_state, state) = state_label(t.revoked_at, t.expired, t.expires_at);
                    let expires = t.expires_at.map(gantry_core::time::format_utc).unwrap_or_else(|| "—".to_string());
                    view! {
                        <tr data-testid="token-row" data-name=t.name.clone() data-state=data_state>
                            <td>{t.name.clone()}</td>
                            <td><code>{format!("{}…", t.prefix)}</code></td>
                            <td data-testid="token-scope-cell">{t.scope.clone()}</td>
                            <td class="nowrap">{gantry_core::time::format_utc(t.created_at)}</td>
                            <td class="nowrap" data-testid="token-expires">{expires}</td>
                            <td class="nowrap" data-testid="token-last-used">{last_used_label(t.last_used_at)}</td>
                            <td>{state}</td>
                            <td>{(!revoked).then(|| view! {
                                <ActionForm action=revoke attr:class="inline">
                                    <input type="hidden" name="token_id" value=t.id/>
                                    {tick_to_confirm("revoke it")}
                                    <button type="submit" class="danger" aria-label=label.clone() data-confirm=question.clone()>"Revoke"</button>
                                </ActionForm>
                            })}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
