//! The account page's SSH section (issue #34): the user's public keys
//! (add, remove; each refusal says why) and the gateway's host-key
//! fingerprint, to compare with what `ssh` shows on the first connect.
//! Server-rendered forms, as the rest of the portal.

use crate::{
    api::ssh_keys::{my_ssh_keys, ssh_gateway, AddSshKey, RemoveSshKey},
    components::{
        confirm::tick_to_confirm,
        form_error::{error, FormError},
    },
};
use gantry_platform::ssh_keys::SshKeyView;
use leptos::prelude::*;

#[component]
pub fn SshKeysSection() -> impl IntoView {
    let add = ServerAction::<AddSshKey>::new();
    let remove = ServerAction::<RemoveSshKey>::new();
    let keys = Resource::new(move || (add.version().get(), remove.version().get()), |_| my_ssh_keys());
    let gateway = Resource::new(|| (), |_| ssh_gateway());
    view! {
        <section class="card stack" id="ssh-keys" data-testid="ssh-keys-section">
            <h2>"SSH keys"</h2>
            <p class="muted small">
                "Keys let you reach your machines with ssh, scp, sftp, VS Code or JetBrains: "
                <code>"ssh -p PORT MACHINE@HOST"</code>
                " (each machine's page shows its command). Passwords are never accepted over SSH. "
                "Accepted: ed25519, ecdsa, and rsa of at least 3072 bits; a key belongs to one account."
            </p>
            <Suspense fallback=|| ()>
                {move || gateway.get().and_then(Result::ok).flatten().map(|gw| view! {
                    <p class="small" data-testid="ssh-host-key">
                        "This server's SSH host key (port " {gw.port} "): " <code>{gw.host_fingerprint}</code>
                    </p>
                })}
            </Suspense>
            <ActionForm action=add attr:class="stack" attr:data-testid="add-ssh-key">
                <label>"Public key (the contents of ~/.ssh/id_ed25519.pub)"
                    <textarea name="public_key" required rows="3" maxlength="16384" spellcheck="false"
                        placeholder="ssh-ed25519 AAAAC3Nza… you@laptop"></textarea>
                </label>
                <label>"Name (optional; the key's comment otherwise)"
                    <input type="text" name="name" maxlength="100" autocomplete="off"/>
                </label>
                <FormError message=error(add)/>
                <button type="submit" class="primary">"Add key"</button>
            </ActionForm>
            <FormError message=error(remove)/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || keys.get().map(|r| match r {
                    Ok(list) => view! { <KeyTable keys=list remove=remove/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn KeyTable(keys: Vec<SshKeyView>, remove: ServerAction<RemoveSshKey>) -> impl IntoView {
    if keys.is_empty() {
        return view! { <p class="muted" data-testid="no-ssh-keys">"No SSH keys yet."</p> }.into_any();
    }
    view! {
        <table class="table" data-testid="ssh-keys">
            <thead><tr><th>"Name"</th><th>"Type"</th><th>"Fingerprint"</th><th>"Added (UTC)"</th><th>"Last used (UTC)"</th><th></th></tr></thead>
            <tbody>
                {keys.into_iter().map(|k| {
                    let label = format!("Remove SSH key {}", k.name);
                    let question = format!("Remove SSH key {}? It stops letting you in at once.", k.name);
                    let used = k.last_used_at.map(gantry_core::time::format_utc).unwrap_or_else(|| "never".into());
                    view! {
                        <tr data-testid="ssh-key-row" data-fingerprint=k.fingerprint.clone()>
                            <td>{k.name.clone()}</td>
                            <td>{format!("{} ({} bits)", k.algorithm, k.bits)}</td>
                            <td><code>{k.fingerprint.clone()}</code></td>
                            <td class="nowrap">{gantry_core::time::format_utc(k.created_at)}</td>
                            <td class="nowrap">{used}</td>
                            <td>
                                <ActionForm action=remove attr:class="inline">
                                    <input type="hidden" name="key_id" value=k.id/>
                                    {tick_to_confirm("remove it")}
                                    <button type="submit" class="danger" aria-label=label data-confirm=question>"Remove"</button>
                                </ActionForm>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
