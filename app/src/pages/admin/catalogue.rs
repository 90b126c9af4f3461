//! The master image catalogue: framework + interpreter combinations users
//! choose for compute tasks, each linked to the region images that provide
//! it. A task can run only in regions that hold a linked region image.

use crate::{
    api::catalogue::{catalogue, CreateMasterImage, LinkImage, UnlinkImage},
    components::form_error::{error, FormError},
};
use gantry_platform::catalogue::{MasterImageRow, RegionImageRow};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn CataloguePage() -> impl IntoView {
    let create = ServerAction::<CreateMasterImage>::new();
    let link = ServerAction::<LinkImage>::new();
    let unlink = ServerAction::<UnlinkImage>::new();
    let data =
        Resource::new(move || (create.version().get(), link.version().get(), unlink.version().get()), |_| catalogue());
    view! {
        <Title text="Catalogue"/>
        <h1>"Master image catalogue"</h1>
        <section class="card stack">
            <h2>"Master images"</h2>
            <p class="muted small">
                "Users pick a framework and interpreter; the task can run in every region holding a region image linked here "
                "(and on a node of that image's architecture)."
            </p>
            <FormError message=error(link)/>
            <FormError message=error(unlink)/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || data.get().map(|r| match r {
                    Ok(c) if c.masters.is_empty() => view! { <p class="muted">"No master images yet."</p> }.into_any(),
                    Ok(c) => {
                        let images = c.region_images;
                        view! {
                            <div class="stack" data-testid="master-images">
                                {c.masters.into_iter().map(|m| view! { <MasterCard m=m images=images.clone() link=link unlink=unlink/> }).collect_view()}
                            </div>
                        }.into_any()
                    }
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
        <section class="card">
            <h2>"New master image"</h2>
            <ActionForm action=create attr:class="stack" attr:data-testid="create-master-image">
                <label>"Name" <input type="text" name="name" required maxlength="64" autocomplete="off" placeholder="e.g. pytorch-2.4-py3.11"/></label>
                <div class="row">
                    <label>"Framework" <input type="text" name="framework" required maxlength="32" placeholder="e.g. PyTorch"/></label>
                    <label>"Framework version" <input type="text" name="framework_version" required maxlength="32" placeholder="e.g. 2.4"/></label>
                </div>
                <div class="row">
                    <label>"Interpreter" <input type="text" name="interpreter" required maxlength="32" placeholder="e.g. Python"/></label>
                    <label>"Interpreter version" <input type="text" name="interpreter_version" required maxlength="32" placeholder="e.g. 3.11"/></label>
                </div>
                <FormError message=error(create)/>
                {move || crate::components::flash::answer(create).map(|id| view! {
                    <p class="form-ok" role="status" data-testid="master-image-created">"Master image #" {id} " added; link region images to it above."</p>
                })}
                <button type="submit" class="primary">"Add master image"</button>
            </ActionForm>
        </section>
    }
}

/// One master image: its combination, its links (each with Unlink), and a
/// form to link one more region image.
#[component]
fn MasterCard(
    m: MasterImageRow,
    images: Vec<RegionImageRow>,
    link: ServerAction<LinkImage>,
    unlink: ServerAction<UnlinkImage>,
) -> impl IntoView {
    let (linked, free): (Vec<RegionImageRow>, Vec<RegionImageRow>) =
        images.into_iter().partition(|i| m.links.contains(&i.id));
    let id = m.id;
    let select_label = format!("Region image to link to {}", m.name);
    let links = if linked.is_empty() {
        view! { <p class="muted small" data-testid="no-links">"No region images linked: tasks asking for this combination are refused."</p> }.into_any()
    } else {
        view! {
            <ul class="links" data-testid="links">
                {linked.into_iter().map(|i| {
                    let label = i.label();
                    view! {
                        <li data-testid="link" data-region-image=i.id>
                            {label.clone()} " "
                            <ActionForm action=unlink attr:class="inline">
                                <input type="hidden" name="master_image_id" value=id/>
                                <input type="hidden" name="region_image_id" value=i.id/>
                                <button type="submit" class="link" aria-label=format!("Unlink {label}")>"Unlink"</button>
                            </ActionForm>
                        </li>
                    }
                }).collect_view()}
            </ul>
        }
        .into_any()
    };
    view! {
        <div class="master stack" data-testid="master-image" data-name=m.name.clone()>
            <div><strong>{m.name.clone()}</strong> " — " <span data-testid="combo">{m.combo_label()}</span></div>
            {links}
            {(!free.is_empty()).then(|| view! {
                <ActionForm action=link attr:class="inline wrap" attr:data-testid="link-form">
                    <input type="hidden" name="master_image_id" value=id/>
                    <select name="region_image_id" aria-label=select_label>
                        {free.into_iter().map(|i| view! { <option value=i.id>{i.label()}</option> }).collect_view()}
                    </select>
                    <button type="submit">"Link"</button>
                </ActionForm>
            })}
        </div>
    }
}
