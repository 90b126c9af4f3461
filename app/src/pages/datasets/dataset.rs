//! One dataset: its definition, its versions (seal, delete), a new version.

use super::{error_view, visibility_label};
use crate::{
    api::datasets::{load_dataset, CreateDatasetVersion, DatasetDetail, DeleteDatasetVersion, SealDatasetVersion},
    components::form_error::{error, FormError},
    model::datasets::version_url,
};
use gantry_core::{datasets::format_bytes, time::format_utc};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn DatasetPage() -> impl IntoView {
    let params = use_params_map();
    let code = move || params.with(|p| p.get("code")).unwrap_or_default();
    let create = ServerAction::<CreateDatasetVersion>::new();
    let seal = ServerAction::<SealDatasetVersion>::new();
    let delete = ServerAction::<DeleteDatasetVersion>::new();
    let detail = Resource::new(
        move || (code(), create.version().get(), seal.version().get(), delete.version().get()),
        |(code, _, _, _)| load_dataset(code),
    );
    view! {
        <p class="crumbs"><a href="/datasets">"← Datasets"</a></p>
        <FormError message=error(seal).or_else(|| error(delete))/>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || detail.get().map(|r| match r {
                Ok(d) => view! { <Detail detail=d create=create seal=seal delete=delete/> }.into_any(),
                Err(e) => error_view(e, "Dataset"),
            })}
        </Transition>
    }
}

#[component]
fn Detail(
    detail: DatasetDetail,
    create: ServerAction<CreateDatasetVersion>,
    seal: ServerAction<SealDatasetVersion>,
    delete: ServerAction<DeleteDatasetVersion>,
) -> impl IntoView {
    let DatasetDetail { dataset: d, versions, may_write } = detail;
    let code = d.code.clone();
    view! {
        <Title text=format!("Dataset {}", d.code)/>
        <h1>{d.name.clone()} " " <code>{d.code.clone()}</code></h1>
        <section class="card">
            <dl class="facts" data-testid="dataset-facts">
                <dt>"Owning region"</dt><dd>{format!("{} ({})", d.region_name, d.region)}</dd>
                <dt>"Category"</dt><dd>{d.category.clone()}</dd>
                <dt>"Visibility"</dt><dd>{visibility_label(d.visibility)}</dd>
                <dt>"Group"</dt><dd>{d.group_name.clone()}</dd>
                <dt>"Created"</dt><dd>{format!("{} by {}", format_utc(d.created_at), d.created_by)}</dd>
                <dt>"Size"</dt><dd>{format_bytes(d.bytes.max(0) as u64)}</dd>
            </dl>
            {(!d.description.is_empty()).then(|| view! { <p>{d.description.clone()}</p> })}
        </section>
        <section class="card stack">
            <h2>"Versions"</h2>
            {if versions.is_empty() {
                view! { <p class="muted" data-testid="no-versions">"No versions yet."</p> }.into_any()
            } else {
                view! {
                    <table class="table" data-testid="versions">
                        <thead><tr><th>"Version"</th><th>"State"</th><th>"Files"</th><th>"Size"</th><th>"Created (UTC)"</th><th></th></tr></thead>
                        <tbody>
                            {versions.into_iter().map(|v| {
                                let sealed = v.sealed_at.is_some();
                                let (c1, c2) = (code.clone(), code.clone());
                                let (n1, n2) = (v.name.clone(), v.name.clone());
                                let question = format!(
                                    "Delete version {} of {}? Its {} file(s), {}, are removed from both stores for good{}.",
                                    v.name,
                                    code,
                                    v.files,
                                    format_bytes(v.bytes.max(0) as u64),
                                    if sealed { "; it is sealed: tasks and machines that mount it will no longer find it" } else { "" }
                                );
                                view! {
                                    <tr data-testid="version-row" data-name=v.name.clone() data-sealed=if sealed { "yes" } else { "no" }>
                                        <td><a href=version_url(&code, &v.name)><code>{v.name.clone()}</code></a></td>
                                        <td>{match v.sealed_at { Some(at) => format!("sealed {}", format_utc(at)), None => "open for uploads".into() }}</td>
                                        <td>{v.files}</td>
                                        <td class="nowrap">{format_bytes(v.bytes.max(0) as u64)}</td>
                                        <td class="nowrap">{format!("{} by {}", format_utc(v.created_at), v.created_by)}</td>
                                        <td class="actions">{may_write.then(|| view! {
                                            {(!sealed).then(|| view! {
                                                <ActionForm action=seal attr:class="inline">
                                                    <input type="hidden" name="code" value=c1.clone()/>
                                                    <input type="hidden" name="version" value=n1.clone()/>
                                                    <button type="submit">"Seal"</button>
                                                </ActionForm>
                                            })}
                                            <ActionForm action=delete attr:class="inline">
                                                <input type="hidden" name="code" value=c2.clone()/>
                                                <input type="hidden" name="version" value=n2.clone()/>
                                                {crate::components::confirm::tick_to_confirm("delete its files")}
                                                <button type="submit" class="danger" data-confirm=question.clone()>"Delete"</button>
                                            </ActionForm>
                                        })}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
            {may_write.then(|| view! {
                <ActionForm action=create attr:class="inline-form" attr:data-testid="create-version">
                    <input type="hidden" name="code" value=d.code.clone()/>
                    <label class="inline-field">"New version " <input type="text" name="name" required maxlength="64" placeholder="v1" autocomplete="off"/></label>
                    <button type="submit" class="primary">"Create version"</button>
                </ActionForm>
                <FormError message=error(create)/>
                <p class="muted small">"Sealing makes a version read-only for good (what compute tasks mount). Deleting removes its files from both stores."</p>
            })}
        </section>
    }
}
