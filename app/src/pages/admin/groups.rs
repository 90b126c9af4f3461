//! Groups and their GPU quotas: list and create.

use crate::{
    api::admin::{list_groups, CreateGroup},
    components::form_error::{error_text, FormError},
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn GroupsPage() -> impl IntoView {
    let create = ServerAction::<CreateGroup>::new();
    let groups = Resource::new(move || create.version().get(), |_| list_groups());
    view! {
        <Title text="Groups"/>
        <h1>"Groups"</h1>
        <div class="grid two">
            <section class="card">
                <h2>"New group"</h2>
                <ActionForm action=create attr:class="stack">
                    <label>"Name" <input type="text" name="name" required maxlength="64"/></label>
                    <label>"GPU quota" <input type="number" name="gpu_quota" min="0" value="0" required/></label>
                    <FormError message=Signal::derive(move || create.value().with(error_text))/>
                    <button type="submit" class="primary">"Create group"</button>
                </ActionForm>
            </section>
            <section class="card">
                <h2>"All groups"</h2>
                <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || groups.get().map(|r| match r {
                        Ok(list) => view! {
                            <table class="table" data-testid="groups">
                                <thead><tr><th>"Name"</th><th>"GPUs in use / quota"</th><th>"Max per machine"</th><th>"Members"</th></tr></thead>
                                <tbody>
                                    {list.into_iter().map(|g| view! {
                                        <tr>
                                            <td>{g.name}</td>
                                            <td>{format!("{} / {}", g.gpus_in_use, g.gpu_quota)}</td>
                                            <td>{g.max_gpus_per_machine}</td>
                                            <td>{g.members}</td>
                                        </tr>
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
