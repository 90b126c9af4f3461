//! Region images: the container images each region can run, with their
//! architecture and type. The master image catalogue links them to the
//! framework/interpreter combinations users choose from.

use crate::{
    api::catalogue::{list_region_images, list_regions, CreateRegionImage},
    components::form_error::{error, FormError},
    model::catalogue::ARCHES,
};
use gantry_core::matching::ImageKind;
use gantry_platform::catalogue::{RegionImageRow, RegionResources};
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn RegionImagesPage() -> impl IntoView {
    let create = ServerAction::<CreateRegionImage>::new();
    let images = Resource::new(move || create.version().get(), |_| list_region_images());
    // Fetched once: the form is built from it and must not be rebuilt.
    let regions = Resource::new(|| (), |_| list_regions());
    view! {
        <Title text="Region images"/>
        <h1>"Region images"</h1>
        <div class="grid two">
            <section class="card">
                <h2>"New region image"</h2>
                <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || regions.get().map(|r| match r {
                        Ok(list) => view! { <ImageForm create=create regions=list/> }.into_any(),
                        Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                    })}
                </Suspense>
            </section>
            <section class="card">
                <h2>"All region images"</h2>
                <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || images.get().map(|r| match r {
                        Ok(list) => view! { <ImageTable images=list/> }.into_any(),
                        Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                    })}
                </Transition>
            </section>
        </div>
    }
}

#[component]
fn ImageForm(create: ServerAction<CreateRegionImage>, regions: Vec<RegionResources>) -> impl IntoView {
    view! {
        <ActionForm action=create attr:class="stack" attr:data-testid="create-region-image">
            <label>"Region"
                <select name="region_code" required>
                    {regions.into_iter().map(|r| {
                        let label = format!("{} — {}", r.code, r.name);
                        view! { <option value=r.code>{label}</option> }
                    }).collect_view()}
                </select>
            </label>
            <label>"Image address"
                <input type="text" name="reference" required maxlength="200" autocomplete="off" placeholder="registry/name:tag"/>
            </label>
            <div class="row">
                <label>"Architecture"
                    <select name="arch">
                        {ARCHES.iter().map(|a| view! { <option value=*a>{*a}</option> }).collect_view()}
                    </select>
                </label>
                <label>"Type"
                    <select name="kind">
                        {ImageKind::ALL.iter().map(|k| view! { <option value=k.as_str()>{k.as_str()}</option> }).collect_view()}
                    </select>
                </label>
            </div>
            <p class="muted small">"The image must be present on the region's nodes' Docker Engines (there is no registry pull)."</p>
            <FormError message=error(create)/>
            {move || crate::components::flash::answer(create).map(|i| view! {
                <p class="form-ok" role="status" data-testid="region-image-created">
                    "Added " <code>{i.reference}</code> " to region " <strong>{i.region}</strong> " (#" {i.id} ")."
                </p>
            })}
            <button type="submit" class="primary">"Add region image"</button>
        </ActionForm>
    }
}

#[component]
fn ImageTable(images: Vec<RegionImageRow>) -> impl IntoView {
    if images.is_empty() {
        return view! { <p class="muted">"No region images yet."</p> }.into_any();
    }
    view! {
        <table class="table" data-testid="region-images">
            <thead><tr><th>"#"</th><th>"Region"</th><th>"Image address"</th><th>"Architecture"</th><th>"Type"</th></tr></thead>
            <tbody>
                {images.into_iter().map(|i| view! {
                    <tr data-testid="region-image-row" data-id=i.id data-region=i.region.clone() data-reference=i.reference.clone() data-arch=i.arch.as_str()>
                        <td>{i.id}</td>
                        <td>{i.region.clone()}</td>
                        <td><code>{i.reference.clone()}</code></td>
                        <td>{i.arch.as_str()}</td>
                        <td>{i.kind.as_str()}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
