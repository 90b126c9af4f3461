//! Users: list (a page at a time, filtered by name, group and status) and
//! create, and each account's life: disable or enable it, set a temporary
//! password (the user must change it at the next sign-in), change its role
//! and its group. The server checks and audits each change. The rows carry
//! their user's name (`data-name`), so live.js keeps a typed temporary
//! password or a chosen role with its user through another user's change,
//! a refused one, or a user added above.

use crate::{
    api::{
        admin::{list_groups, CreateUser, ResetPassword, SetUserEnabled, SetUserGroup, SetUserRole},
        lists::users_window,
    },
    components::{
        form_error::{error, FormError},
        list_nav::{use_list_query, FilterForm, Pager, StateLinks},
        poll::Polled,
    },
    model::lists::{ListQuery, Listed},
};
use gantry_platform::accounts::{Group, User};
use leptos::prelude::*;
use leptos_meta::Title;

/// The per-user actions, owned by the page so a result survives the list's
/// refetch.
#[derive(Clone, Copy)]
struct UserActions {
    enabled: ServerAction<SetUserEnabled>,
    reset: ServerAction<ResetPassword>,
    role: ServerAction<SetUserRole>,
    group: ServerAction<SetUserGroup>,
}

#[component]
pub fn UsersPage() -> impl IntoView {
    let create = ServerAction::<CreateUser>::new();
    let actions = UserActions {
        enabled: ServerAction::new(),
        reset: ServerAction::new(),
        role: ServerAction::new(),
        group: ServerAction::new(),
    };
    let query = use_list_query();
    let users = Resource::new(move || query.get(), |q| users_window(q.state, q.user, q.group, q.page));
    let groups = Resource::new(|| (), |_| list_groups());
    // The change a form of this page just made (carried back signed in the
    // redirect), or the error it came back with.
    use crate::components::flash::answer;
    let a = actions;
    let outcome = || {
        answer(a.enabled)
            .map(|u| {
                format!(
                    "{} is now {}",
                    u.username,
                    if u.disabled { "disabled; their sessions ended" } else { "enabled" }
                )
            })
            .or_else(|| {
                answer(a.reset).map(|u| {
                    format!("{} has a temporary password; they must change it at their next sign-in", u.username)
                })
            })
            .or_else(|| answer(a.role).map(|u| format!("{} is now {}", u.username, u.role)))
            .or_else(|| answer(a.group).map(|u| format!("{} is now in group {}", u.username, u.group_name)))
    };
    // The refusal a form of this page came back with (one at a time).
    let refused = error(a.enabled).or_else(|| error(a.reset)).or_else(|| error(a.role)).or_else(|| error(a.group));

    view! {
        <Title text="Users"/>
        <h1>"Users"</h1>
        <div class="grid two">
            <section class="card">
                <h2>"New user"</h2>
                <ActionForm action=create attr:class="stack" attr:data-testid="create-user">
                    <label>"Username"
                        <input type="text" name="username" required maxlength="64" autocomplete="off"/>
                    </label>
                    <label>"Password"
                        <input type="password" name="password" required minlength="8" maxlength="256" autocomplete="new-password"/>
                    </label>
                    <label>"Role"
                        <select name="role">
                            <option value="user" selected>"user"</option>
                            <option value="admin">"admin"</option>
                        </select>
                    </label>
                    <label>"Group"
                        <select name="group">
                            <Suspense fallback=|| view! { <option value="">"default"</option> }>
                                {move || groups.get().and_then(Result::ok).map(|gs| gs.into_iter().map(|g| {
                                    let selected = g.name == gantry_core::DEFAULT_GROUP;
                                    view! { <option value=g.name.clone() selected=selected>{g.name.clone()}</option> }
                                }).collect_view())}
                            </Suspense>
                        </select>
                    </label>
                    <FormError message=error(create)/>
                    {crate::components::flash::answer(create).map(|u| view! {
                        <p class="form-ok" role="status">"Created " <strong>{u.username}</strong></p>
                    })}
                    <button type="submit" class="primary">"Create user"</button>
                </ActionForm>
            </section>
            <section class="card stack">
                <h2>"All users"</h2>
                <FormError message=refused/>
                {outcome().map(|m| view! { <p class="form-ok" role="status" data-testid="user-changed">{m}</p> })}
                {move || view! { <FilterForm base="/admin" query=query.get() user_label="Username"/> }}
                <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    <UserTable users=users groups=groups query=query actions=actions/>
                </Transition>
            </section>
        </div>
    }
}

#[component]
fn UserTable(
    users: Polled<Listed<User>>,
    groups: Polled<Vec<Group>>,
    query: Memo<ListQuery>,
    actions: UserActions,
) -> impl IntoView {
    move || {
        // A group list that failed leaves the selects with no choices.
        let names: Vec<String> =
            groups.get().and_then(Result::ok).map(|gs| gs.into_iter().map(|g| g.name).collect()).unwrap_or_default();
        users.get().map(|r| match r {
            Ok(w) => view! {
                <StateLinks base="/admin" query=query.get() counts=w.counts.clone()/>
                <table class="table" data-testid="users">
                    <thead><tr><th>"Username"</th><th>"Role"</th><th>"Group"</th><th>"Manage"</th></tr></thead>
                    <tbody>
                        {w.rows.into_iter().map(|u| view! { <UserLine u=u groups=names.clone() actions=actions/> }).collect_view()}
                    </tbody>
                </table>
                <Pager base="/admin" query=query.get() counts=w.counts/>
            }
            .into_any(),
            Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
        })
    }
}

#[component]
fn UserLine(u: User, groups: Vec<String>, actions: UserActions) -> impl IntoView {
    let (id, name) = (u.id, u.username.clone());
    let toggle = if u.disabled { ("enable", "Enable") } else { ("disable", "Disable") };
    let status = u.disabled.then(|| view! { " " <span class="tag warn" data-testid="user-disabled">"disabled"</span> });
    let temporary = u.must_change_password.then(|| view! { " " <span class="tag" title="must choose a new password at the next sign-in">"temporary password"</span> });
    let role = u.role.to_string();
    let (role_label, group_label, reset_label) =
        (format!("Role of {name}"), format!("Group of {name}"), format!("Temporary password for {name}"));
    let shown = name.clone();
    view! {
        <tr data-testid="user-row" data-name=name>
            <td>{shown} {status} {temporary}</td>
            <td>{role.clone()}</td>
            <td>{u.group_name.clone()}</td>
            <td class="user-manage">
                <ActionForm action=actions.enabled attr:data-testid="user-enabled">
                    <input type="hidden" name="user_id" value=id/>
                    <input type="hidden" name="action" value=toggle.0/>
                    <button type="submit">{toggle.1}</button>
                </ActionForm>
                <ActionForm action=actions.role attr:data-testid="user-role">
                    <input type="hidden" name="user_id" value=id/>
                    <select name="role" aria-label=role_label>
                        {["user", "admin"].map(|r| view! { <option value=r selected=r == role>{r}</option> }).into_iter().collect_view()}
                    </select>
                    <button type="submit">"Set role"</button>
                </ActionForm>
                <ActionForm action=actions.group attr:data-testid="user-group">
                    <input type="hidden" name="user_id" value=id/>
                    <select name="group" aria-label=group_label>
                        {groups.into_iter().map(|g| {
                            let selected = g == u.group_name;
                            view! { <option value=g.clone() selected=selected>{g.clone()}</option> }
                        }).collect_view()}
                    </select>
                    <button type="submit">"Move"</button>
                </ActionForm>
                <ActionForm action=actions.reset attr:data-testid="user-reset">
                    <input type="hidden" name="user_id" value=id/>
                    <input type="password" name="password" required minlength="8" maxlength="256" autocomplete="new-password"
                        placeholder="temporary password" aria-label=reset_label/>
                    <button type="submit">"Reset password"</button>
                </ActionForm>
            </td>
        </tr>
    }
}
