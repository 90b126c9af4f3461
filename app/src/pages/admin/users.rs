//! Users: list and create.

use crate::{
    api::admin::{list_groups, list_users, CreateUser},
    components::form_error::{error_text, FormError},
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn UsersPage() -> impl IntoView {
    let create = ServerAction::<CreateUser>::new();
    let users = Resource::new(move || create.version().get(), |_| list_users());
    let groups = Resource::new(|| (), |_| list_groups());
    // Same rules as the server, checked as you type.
    let (name, set_name) = signal(String::new());
    let name_hint = move || {
        let n = name.get();
        (!n.is_empty()).then(|| gantry_core::validate::name("username", n.trim()).err().map(|e| e.to_string())).flatten()
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
                    {move || create.value().get().and_then(Result::ok).map(|u| view! {
                        <p class="form-ok" role="status">"Created " <strong>{u.username}</strong></p>
                    })}
                    <button type="submit" class="primary">"Create user"</button>
                </ActionForm>
            </section>
            <section class="card">
                <h2>"All users"</h2>
                <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || users.get().map(|r| match r {
                        Ok(list) => view! {
                            <table class="table" data-testid="users">
                                <thead><tr><th>"Username"</th><th>"Role"</th><th>"Group"</th></tr></thead>
                                <tbody>
                                    {list.into_iter().map(|u| view! {
                                        <tr><td>{u.username}</td><td>{u.role.to_string()}</td><td>{u.group}</td></tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any(),
                        Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                    })}
                </Suspense>
            </section>
        </div>
    }
}
