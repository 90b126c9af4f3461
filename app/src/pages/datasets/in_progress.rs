//! "Uploads in progress" on a version's page: each upload the server holds
//! for it and has not listed — one still coming, or one whose tab was
//! closed or whose row gave up — with what it holds, who started it, when
//! it was last active and whether a request is writing it now, and a
//! Cancel that works without JavaScript too. An abandoned upload keeps its
//! name, its quota reservation and the version's Seal blocked until it is
//! cancelled (or expires): this is where that is seen and ended.

use crate::{api::datasets::CancelDatasetUpload, model::datasets::held_label};
use gantry_core::time::format_utc;
use gantry_platform::datasets::UploadInProgress;
use leptos::prelude::*;

#[component]
pub fn UploadsInProgress(
    code: String,
    version: String,
    uploads: Vec<UploadInProgress>,
    cancel: ServerAction<CancelDatasetUpload>,
) -> impl IntoView {
    if uploads.is_empty() {
        return ().into_any();
    }
    view! {
        <section class="card" data-testid="uploads-in-progress">
            <h2>"Uploads in progress"</h2>
            <p class="muted small">
                "Until it is finished or cancelled, an upload keeps its name, the space it declared against the group's quota, and the version from being sealed. "
                "Its uploader continues it by choosing the same file again above; Cancel throws away what the server holds."
            </p>
            <table class="table">
                <thead><tr><th>"Name"</th><th>"Held"</th><th>"Started by"</th><th>"Last activity (UTC)"</th><th>"Now"</th><th></th></tr></thead>
                <tbody>
                    {uploads.into_iter().map(|u| {
                        let held = u.held.map(|h| h.to_string()).unwrap_or_default();
                        let total = u.total.map(|t| t.to_string()).unwrap_or_default();
                        let (code, version, name) = (code.clone(), version.clone(), u.name.clone());
                        let label = format!("Cancel the upload of {}", u.name);
                        view! {
                            <tr data-testid="upload-in-progress" data-name=u.name.clone() data-held=held data-total=total
                                data-receiving=if u.receiving { "yes" } else { "no" }>
                                <td>{u.name.clone()}</td>
                                <td class="nowrap">{held_label(u.held, u.total)}</td>
                                <td>{format!("{} at {}", u.started_by, format_utc(u.started_at))}</td>
                                <td class="nowrap">{format_utc(u.touched_at)}</td>
                                <td>{if u.receiving { "receiving" } else if u.resumable { "idle: can be continued" } else { "idle" }}</td>
                                <td class="actions">
                                    <ActionForm action=cancel attr:class="inline">
                                        <input type="hidden" name="code" value=code/>
                                        <input type="hidden" name="version" value=version/>
                                        <input type="hidden" name="name" value=name/>
                                        <button type="submit" aria-label=label>"Cancel"</button>
                                    </ActionForm>
                                </td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
    .into_any()
}
