//! One version: its files (size, SHA-256, who, when, download) and, while
//! it is open and the viewer's group owns it, the upload area and the
//! uploads in progress (`in_progress`).

use super::{error_view, in_progress::UploadsInProgress};
use crate::island::UploadArea;
use crate::{
    api::datasets::{load_dataset_version, CancelDatasetUpload, VersionDetail},
    components::form_error::{error, FormError},
    model::datasets::{download_url, encode},
};
use gantry_core::{datasets::format_bytes, time::format_utc};
use gantry_platform::datasets::FileView;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

#[component]
pub fn DatasetVersionPage() -> impl IntoView {
    let params = use_params_map();
    let key = move || params.with(|p| (p.get("code").unwrap_or_default(), p.get("version").unwrap_or_default()));
    let cancel = ServerAction::<CancelDatasetUpload>::new();
    let detail = Resource::new(key, |(code, version)| load_dataset_version(code, version));
    let files = Resource::new(
        move || (key(), cancel.version().get()),
        |((code, version), _)| load_dataset_version(code, version),
    );
    // What the upload form (without JavaScript) just did, kept for this page.
    let upload = crate::components::flash::outcome_of(crate::components::flash::DATASET_UPLOAD);
    let done = upload.as_ref().and_then(|o| o.answer.clone());
    let failed = upload.and_then(|o| o.error);
    view! {
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || detail.get().map(|r| match r {
                Ok(d) => view! { <Header detail=d/> }.into_any(),
                Err(e) => error_view(e, "Dataset version"),
            })}
        </Transition>
        {done.map(|names| view! { <p class="notice" role="status" data-testid="upload-done">"Uploaded: " {names}</p> })}
        {failed.map(|m| view! { <p class="form-error" role="alert" data-testid="upload-error">{m}</p> })}
        <FormError message=error(cancel)/>
        <Transition fallback=|| ()>
            {move || files.get().and_then(Result::ok).map(|d| view! {
                <UploadsInProgress code=d.dataset.code.clone() version=d.version.name.clone() uploads=d.uploads cancel=cancel/>
                <FileTable code=d.dataset.code version=d.version.name files=d.files/>
            })}
        </Transition>
    }
}

#[component]
fn Header(detail: VersionDetail) -> impl IntoView {
    let VersionDetail { dataset: d, version: v, may_write, upload_max_bytes, .. } = detail;
    let open = v.sealed_at.is_none();
    view! {
        <Title text=format!("{} {}", d.code, v.name)/>
        <p class="crumbs"><a href="/datasets">"Datasets"</a> " / " <a href=format!("/datasets/{}", encode(&d.code))>{d.code.clone()}</a></p>
        <h1>{d.name.clone()} " " <code>{format!("{}/{}", d.code, v.name)}</code></h1>
        <p class="muted" data-testid="version-state">
            {match v.sealed_at {
                Some(at) => format!("Sealed {} — read-only.", format_utc(at)),
                None => "Open for uploads.".to_string(),
            }}
            {format!(" Files are stored under {}/{}/{}/ in the central store and in region {}'s store.", d.code, v.name, d.category, d.region)}
        </p>
        {(may_write && open).then(|| view! {
            <UploadArea code=d.code.clone() version=v.name.clone() max_bytes=upload_max_bytes/>
        })}
    }
}

#[component]
fn FileTable(code: String, version: String, files: Vec<FileView>) -> impl IntoView {
    if files.is_empty() {
        return view! { <section class="card"><p class="muted" data-testid="no-files">"No files yet."</p></section> }
            .into_any();
    }
    view! {
        <section class="card">
            <h2>"Files"</h2>
            <table class="table" data-testid="files">
                <thead><tr><th>"Name"</th><th>"Size"</th><th>"SHA-256"</th><th>"Uploaded by"</th><th>"When (UTC)"</th><th></th></tr></thead>
                <tbody>
                    {files.into_iter().map(|f| view! {
                        <tr data-testid="file-row" data-name=f.name.clone()>
                            <td>{f.name.clone()}</td>
                            <td class="nowrap" title=format!("{} bytes", f.size)>{format_bytes(f.size.max(0) as u64)}</td>
                            <td><code class="sha" data-testid="file-sha256">{f.sha256.clone()}</code></td>
                            <td>{f.uploaded_by.clone()}</td>
                            <td class="nowrap">{format_utc(f.uploaded_at)}</td>
                            <td><a href=download_url(&code, &version, &f.name) download="">"Download"</a></td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
    .into_any()
}
