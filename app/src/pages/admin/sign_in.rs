//! Admin → Sign-in: which directory groups may use Gantry, in which Gantry
//! group and with which role (applied at each directory sign-in), and
//! whether local passwords still sign in. The rule between several mapped
//! groups is written on the page, as `gantry_core::sso_mapping` applies it.

use crate::{
    api::sso_admin::{sign_in_setup, AddSsoMapping, RemoveSsoMapping, SetLocalPasswords, SignInView},
    components::form_error::{error, FormError},
};
use gantry_platform::sso::mapping::MappingRow;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn SignInPage() -> impl IntoView {
    let add = ServerAction::<AddSsoMapping>::new();
    let remove = ServerAction::<RemoveSsoMapping>::new();
    let local = ServerAction::<SetLocalPasswords>::new();
    let setup = Resource::new(
        move || (add.version().get(), remove.version().get(), local.version().get()),
        |_| sign_in_setup(),
    );
    view! {
        <Title text="Sign-in"/>
        <h1>"Sign-in"</h1>
        <FormError message=error(add)/>
        <FormError message=error(remove)/>
        <FormError message=error(local)/>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || setup.get().map(|r| match r {
                Ok(s) => view! { <Setup setup=s add=add remove=remove local=local/> }.into_any(),
                Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
            })}
        </Transition>
    }
}

#[component]
fn Setup(
    setup: SignInView,
    add: ServerAction<AddSsoMapping>,
    remove: ServerAction<RemoveSsoMapping>,
    local: ServerAction<SetLocalPasswords>,
) -> impl IntoView {
    let directory = match &setup.ldap_url {
        Some(url) => format!("LDAP directory: {url}. Usernames and passwords typed on the sign-in page are checked there for accounts that are not local."),
        None => "No LDAP directory is configured (--ldap-url).".to_string(),
    };
    let groups = setup.groups.clone();
    view! {
        <section class="card stack" data-testid="sso-mappings">
            <h2>"Directory groups"</h2>
            <p class="muted small">{directory}</p>
            <p class="muted small">
                "At each sign-in through the directory (LDAP or OpenID Connect), the account's directory groups are matched against this list "
                "(ignoring case). The mapping with the lowest priority number chooses the Gantry group (equal numbers: the one added first); "
                "the account is an administrator when any matching mapping says admin. An account in no listed group cannot sign in, "
                "and an account it had is disabled, its sessions and API tokens ended."
            </p>
            <MappingTable rows=setup.mappings remove=remove/>
            <ActionForm action=add attr:class="stack" attr:data-testid="add-sso-mapping">
                <div class="row">
                    <label>"Directory group"
                        <input type="text" name="directory_group" required maxlength="512" autocomplete="off"
                            placeholder="e.g. cn=ml,ou=groups,dc=example,dc=org"/>
                    </label>
                    <label>"Gantry group"
                        <select name="group">
                            {groups.into_iter().map(|g| view! { <option value=g.clone()>{g.clone()}</option> }).collect_view()}
                        </select>
                    </label>
                    <label>"Role"
                        <select name="role">
                            <option value="user">"user"</option>
                            <option value="admin">"admin"</option>
                        </select>
                    </label>
                    <label>"Priority" <input type="text" name="priority" inputmode="numeric" size="6" value="100"/></label>
                </div>
                {move || crate::components::flash::answer(add).map(|g| view! {
                    <p class="form-ok" role="status" data-testid="sso-mapping-added">"Mapped " <strong>{g}</strong></p>
                })}
                <button type="submit" class="primary">"Add mapping"</button>
            </ActionForm>
        </section>
        <LocalPasswords setup=setup.settings local=local/>
    }
}

#[component]
fn MappingTable(rows: Vec<MappingRow>, remove: ServerAction<RemoveSsoMapping>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="muted" data-testid="sso-no-mappings">"No directory group is mapped: nobody can sign in through the directory yet."</p> }.into_any();
    }
    view! {
        <table class="table">
            <thead><tr><th>"Directory group"</th><th>"Gantry group"</th><th>"Role"</th><th>"Priority"</th><th></th></tr></thead>
            <tbody>
                {rows.into_iter().map(|m| {
                    let (dir, name) = (m.directory_group.clone(), m.directory_group.clone());
                    let label = format!("remove the mapping of {}", m.directory_group);
                    view! {
                        <tr data-testid="sso-mapping-row" data-name=name>
                            <td><code>{dir}</code></td>
                            <td>{m.gantry_group}</td>
                            <td>{m.role.to_string()}</td>
                            <td>{m.priority}</td>
                            <td>
                                <ActionForm action=remove attr:class="inline">
                                    <input type="hidden" name="id" value=m.id/>
                                    <button type="submit" aria-label=label>"Remove"</button>
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

#[component]
fn LocalPasswords(
    setup: gantry_platform::sso::settings::Settings,
    local: ServerAction<SetLocalPasswords>,
) -> impl IntoView {
    let state = if setup.local_passwords_off {
        "Local passwords are off: only the break-glass admin signs in with one."
    } else {
        "Local passwords are on: local accounts sign in with their password, as before."
    };
    view! {
        <section class="card stack" data-testid="local-passwords">
            <h2>"Local passwords"</h2>
            <p>{state}</p>
            <ActionForm action=local attr:class="stack">
                <label class="check">
                    <input type="checkbox" name="off" value="on" checked=setup.local_passwords_off/>
                    " Local passwords off except the break-glass admin"
                </label>
                <label>"Break-glass admin (an enabled local administrator)"
                    <input type="text" name="break_glass_admin" maxlength="64" autocomplete="off"
                        value=setup.break_glass_admin.unwrap_or_default()/>
                </label>
                <button type="submit" class="primary">"Save"</button>
            </ActionForm>
        </section>
    }
}
