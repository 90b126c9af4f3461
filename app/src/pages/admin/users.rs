//! Users: list (a page at a time, filtered by name, group and status) and
//! create, and each account's life: disable or enable it, set a temporary
//! password (the user must change it at the next sign-in), change its role
//! and its group. The server checks and audits each change. The rows are
//! keyed, each rebuilt only when its account changed: a typed temporary
//! password or a chosen role stays with its user through another user's
//! change, a refused one, or a user added above.

use crate::{
    api::{
        admin::{list_groups, CreateUser, ResetPassword, SetUserEnabled, SetUserGroup, SetUserRole},
        lists::users_window,
    },
    components::{
        form_error::{error_text, FormError},
        kept_rows::{kept, kept_rows},
        list_nav::{use_list_query, FilterForm, Pager, StateLinks},
        polled::Polled,
    },
    error::AppError,
    model::{
        lists::{ListQuery, UsersWindow},
        GroupRow, UserRow,
    },
};
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
    let creating = create.pending();
    let actions = UserActions {
        enabled: ServerAction::new(),
        reset: ServerAction::new(),
        role: ServerAction::new(),
        group: ServerAction::new(),
    };
    let query = use_list_query();
    let users = Resource::new(
        move || {
            let versions = (
                create.version().get(),
                actions.enabled.version().get(),
                actions.reset.version().get(),
                actions.role.version().get(),
                actions.group.version().get(),
            );
            (versions, query.get())
        },
        |(_, q)| users_window(q.state, q.user, q.group, q.page),
    );
    let groups = Resource::new(|| (), |_| list_groups());
    // Same rules as the server, checked as you type.
    let (name, set_name) = signal(String::new());
    let name_hint = move || {
        let n = name.get();
        (!n.is_empty()).then(|| gantry_core::validate::username(n.trim()).err().map(|e| e.to_string())).flatten()
    };
    // The change a form of this page just made (carried back signed in the
    // redirect), or the error it came back with.
    use crate::components::nojs_done::answer;
    let a = actions;
    let outcome = move || {
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
            .or_else(|| answer(a.group).map(|u| format!("{} is now in group {}", u.username, u.group)))
    };
    let latest = RwSignal::new(None::<u8>);
    type Answer = Signal<Option<Result<UserRow, AppError>>>;
    let values: [Answer; 4] = [
        Signal::derive(move || a.enabled.value().get()),
        Signal::derive(move || a.reset.value().get()),
        Signal::derive(move || a.role.value().get()),
        Signal::derive(move || a.group.value().get()),
    ];
    let error_of = move |which: u8| {
        let value = values[usize::from(which)];
        Signal::derive(move || if latest.get().is_none_or(|l| l == which) { value.with(error_text) } else { None })
    };

    view! {
        <Title text="Users"/>
        <h1>"Users"</h1>
        <div class="grid two">
            <section class="card">
                <h2>"New user"</h2>
                <ActionForm action=create attr:class="stack" attr:data-testid="create-user">
                    <label>"Username"
                        <input type="text" name="username" required maxlength="64" autocomplete="off"
                            on:input=move |ev| set_name.set(event_target_value(&ev))/>
                    </label>
                    {move || name_hint().map(|h| view! { <p class="hint">{h}</p> })}
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
                    <FormError message=Signal::derive(move || create.value().with(error_text))/>
                    {move || crate::components::nojs_done::answer(create).map(|u| view! {
                        <p class="form-ok" role="status">"Created " <strong>{u.username}</strong></p>
                    })}
                    <button type="submit" class="primary" disabled=move || creating.get()>"Create user"</button>
                </ActionForm>
            </section>
            <section class="card stack">
                <h2>"All users"</h2>
                <FormError message=error_of(0)/>
                <FormError message=error_of(1)/>
                <FormError message=error_of(2)/>
                <FormError message=error_of(3)/>
                {move || outcome().map(|m| view! { <p class="form-ok" role="status" data-testid="user-changed">{m}</p> })}
                {move || view! { <FilterForm base="/admin" query=query.get() user_label="Username"/> }}
                <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    <UserTable users=users groups=groups query=query actions=actions/>
                </Transition>
            </section>
        </div>
    }
}

/// A user's row as shown: the account and the groups it may be moved to.
#[derive(Clone, PartialEq)]
struct UserItem {
    user: UserRow,
    groups: Vec<String>,
}

#[component]
fn UserTable(
    users: Polled<UsersWindow>,
    groups: Polled<Vec<GroupRow>>,
    query: Memo<ListQuery>,
    actions: UserActions,
) -> impl IntoView {
    let rows = kept_rows(
        move || {
            let (users, groups) = (users.get(), groups.get());
            // A group list that failed leaves the selects with no choices.
            let names: Vec<String> = groups?.map(|gs| gs.into_iter().map(|g| g.name).collect()).unwrap_or_default();
            Some(users?.map(|w| w.rows.into_iter().map(|user| UserItem { user, groups: names.clone() }).collect()))
        },
        |i: &UserItem| i.user.id,
    );
    let counts = kept(move || users.get().map(|r| r.map(|w| w.counts)));
    view! {
        {move || rows.error.get().map(|e| view! { <p class="form-error">{e.to_string()}</p> })}
        {move || counts.data.get().map(|c| view! { <StateLinks base="/admin" query=query.get() counts=c/> })}
        // Hidden, not left out, until there are rows: see kept_rows.
        <table class="table" data-testid="users" hidden=move || rows.data.with(Option::is_none)>
            <thead><tr><th>"Username"</th><th>"Role"</th><th>"Group"</th><th>"Manage"</th></tr></thead>
            <tbody>
                <For each=move || rows.data.get().unwrap_or_default() key=|r| r.key let:r>
                    <UserLine u=r.data.user groups=r.data.groups actions=actions/>
                </For>
            </tbody>
        </table>
        {move || counts.data.get().map(|c| view! { <Pager base="/admin" query=query.get() counts=c/> })}
    }
}

#[component]
fn UserLine(u: UserRow, groups: Vec<String>, actions: UserActions) -> impl IntoView {
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
            <td>{u.group.clone()}</td>
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
                            let selected = g == u.group;
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
