//! The dataset pages (PRODUCT C): the list with search and filters and a
//! form for a new dataset; a dataset with its versions; a version with
//! its files and the upload area. Filters are a plain GET form, so all of
//! it works without JavaScript too.

mod dataset;
mod in_progress;
mod version;

pub use dataset::DatasetPage;
pub use version::DatasetVersionPage;

use crate::{
    api::datasets::{load_datasets, CreateDataset},
    components::form_error::{error, FormError},
    error::AppError,
    model::datasets::encode,
};
use gantry_core::datasets::{format_bytes, Visibility, CATEGORIES};
use gantry_platform::datasets::DatasetView;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn DatasetsPage() -> impl IntoView {
    let query = use_query_map();
    let param = move |k: &str| query.with(|q| q.get(k)).unwrap_or_default();
    let create = ServerAction::<CreateDataset>::new();
    let list = Resource::new(
        move || (param("q"), param("region"), param("category"), create.version().get()),
        |(q, region, category, _)| load_datasets(q, region, category),
    );
    view! {
        <Title text="Datasets"/>
        <h1>"Datasets"</h1>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || list.get().map(|r| match r {
                Ok(l) => {
                    let regions = l.regions.clone();
                    view! {
                        <section class="card stack">
                            <form method="get" action="/datasets" class="filters" data-testid="dataset-filters">
                                <input type="search" name="q" placeholder="Search code, name, description" value=param("q") aria-label="Search"/>
                                <select name="region" aria-label="Region">
                                    <option value="">"All regions"</option>
                                    {l.regions.iter().map(|(code, name)| {
                                        let selected = param("region") == *code;
                                        view! { <option value=code.clone() selected=selected>{format!("{name} ({code})")}</option> }
                                    }).collect_view()}
                                </select>
                                <select name="category" aria-label="Category">
                                    <option value="">"All categories"</option>
                                    {CATEGORIES.iter().map(|c| view! { <option value=*c selected=param("category") == *c>{*c}</option> }).collect_view()}
                                </select>
                                <button type="submit">"Filter"</button>
                            </form>
                            <DatasetTable datasets=l.datasets/>
                        </section>
                        <NewDataset create=create regions=regions/>
                    }.into_any()
                }
                Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
            })}
        </Transition>
    }
}

#[component]
fn DatasetTable(datasets: Vec<DatasetView>) -> impl IntoView {
    if datasets.is_empty() {
        return view! { <p class="muted" data-testid="no-datasets">"No datasets match."</p> }.into_any();
    }
    view! {
        <table class="table" data-testid="datasets">
            <thead><tr><th>"Code"</th><th>"Name"</th><th>"Region"</th><th>"Category"</th><th>"Visibility"</th><th>"Group"</th><th>"Versions"</th><th>"Size"</th></tr></thead>
            <tbody>
                {datasets.into_iter().map(|d| view! {
                    <tr data-testid="dataset-row" data-code=d.code.clone()>
                        <td><a href=format!("/datasets/{}", encode(&d.code))><code>{d.code.clone()}</code></a></td>
                        <td>{d.name.clone()}</td>
                        <td>{d.region.clone()}</td>
                        <td>{d.category.clone()}</td>
                        <td>{visibility_label(d.visibility)}</td>
                        <td>{d.group_name.clone()}</td>
                        <td>{d.versions}</td>
                        <td class="nowrap">{format_bytes(d.bytes.max(0) as u64)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

pub(crate) fn visibility_label(v: Visibility) -> &'static str {
    match v {
        Visibility::Public => "public (every group)",
        Visibility::Group => "group only",
    }
}

#[component]
fn NewDataset(create: ServerAction<CreateDataset>, regions: Vec<(String, String)>) -> impl IntoView {
    view! {
        <section class="card">
            <h2>"New dataset"</h2>
            <ActionForm action=create attr:class="stack" attr:data-testid="create-dataset">
                <label>"Code" <input type="text" name="code" required maxlength="64" pattern="[a-z0-9][a-z0-9_\\-]*" placeholder="e.g. coco-2017" autocomplete="off"/></label>
                <label>"Name" <input type="text" name="name" required maxlength="120"/></label>
                <label>"Owning region"
                    <select name="region">
                        {regions.into_iter().map(|(code, name)| view! { <option value=code.clone()>{format!("{name} ({code})")}</option> }).collect_view()}
                    </select>
                </label>
                <label>"Category"
                    <select name="category">
                        {CATEGORIES.iter().map(|c| view! { <option value=*c>{*c}</option> }).collect_view()}
                    </select>
                </label>
                <label>"Description" <textarea name="description" maxlength="2000" rows="2"></textarea></label>
                <label>"Visibility"
                    <select name="visibility">
                        <option value="group">"Group only"</option>
                        <option value="public">"Public: every group may see and download it"</option>
                    </select>
                </label>
                <p class="muted small">"Codes: lowercase letters, digits, '-' and '_'. Files are stored in the central store and the owning region's, under code/version/category/file."</p>
                <FormError message=error(create)/>
                <button type="submit" class="primary">"Create dataset"</button>
            </ActionForm>
        </section>
    }
}

/// The 404 view of a dataset or version that does not exist for this viewer.
pub(crate) fn not_found(what: &str) -> AnyView {
    #[cfg(feature = "ssr")]
    if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
        resp.set_status(http::StatusCode::NOT_FOUND);
    }
    let title = format!("{what} not found");
    view! {
        <Title text=title.clone()/>
        <section class="card empty" data-testid="dataset-not-found">
            <h1>{title}</h1>
            <p class="muted">"There is no such dataset, or it belongs to another group."</p>
        </section>
    }
    .into_any()
}

pub(crate) fn error_view(e: AppError, what: &str) -> AnyView {
    match e {
        AppError::NotFound(_) => not_found(what),
        e => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
    }
}
