//! The dev-machine image catalogue: list and add. The default image is
//! what a create without a chosen image uses.

use crate::{
    api::fleet::{list_images, CreateImage},
    components::form_error::{error, FormError},
};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn ImagesPage() -> impl IntoView {
    let create = ServerAction::<CreateImage>::new();
    let images = Resource::new(move || create.version().get(), |_| list_images());
    view! {
        <Title text="Images"/>
        <h1>"Images"</h1>
        <div class="grid two">
            <section class="card">
                <h2>"New image"</h2>
                <ActionForm action=create attr:class="stack" attr:data-testid="create-image">
                    <label>"Name" <input type="text" name="name" required maxlength="32" autocomplete="off"/></label>
                    <label>"Reference"
                        <input type="text" name="reference" required maxlength="255" placeholder="registry/name:tag" autocomplete="off"/>
                    </label>
                    <label>"Description" <input type="text" name="description" maxlength="500"/></label>
                    <label class="check"><input type="checkbox" name="make_default"/>" Make this the default image"</label>
                    <p class="muted small">"The image must exist on the worker nodes' Docker Engines (there is no registry pull)."</p>
                    <FormError message=error(create)/>
                    {move || crate::components::flash::answer(create).map(|i| view! {
                        <p class="form-ok" role="status">"Added " <strong>{i.name}</strong></p>
                    })}
                    <button type="submit" class="primary">"Add image"</button>
                </ActionForm>
            </section>
            <section class="card">
                <h2>"All images"</h2>
                <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || images.get().map(|r| match r {
                        Ok(list) if list.is_empty() => view! { <p class="muted">"No images yet."</p> }.into_any(),
                        Ok(list) => view! {
                            <table class="table" data-testid="images">
                                <thead><tr><th>"Name"</th><th>"Reference"</th><th>"Description"</th><th></th></tr></thead>
                                <tbody>
                                    {list.into_iter().map(|i| view! {
                                        <tr data-testid="image-row" data-name=i.name.clone()>
                                            <td><strong>{i.name.clone()}</strong></td>
                                            <td><code>{i.reference}</code></td>
                                            <td>{i.description}</td>
                                            <td>{i.is_default.then(|| view! { <span class="badge running">"default"</span> })}</td>
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
