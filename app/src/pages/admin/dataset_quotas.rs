//! The admin console's dataset storage card: per group, the bytes its
//! datasets hold (and reserve for uploads in progress) against its byte
//! quota, with a form per group to set the quota. The rows carry their
//! group's name, so live.js keeps a typed quota in its group's row when a
//! group is added.

use crate::{
    api::dataset_quotas::{dataset_storage, SetDatasetQuota},
    components::{
        form_error::{error, FormError},
        poll::Polled,
    },
};
use gantry_core::datasets::format_bytes;
use gantry_platform::datasets::quotas::GroupStorage;
use leptos::prelude::*;

#[component]
pub fn DatasetQuotas() -> impl IntoView {
    let set = ServerAction::<SetDatasetQuota>::new();
    let rows = Resource::new(move || set.version().get(), |_| dataset_storage());
    view! {
        <section class="card" data-testid="dataset-storage">
            <h2>"Dataset storage"</h2>
            <p class="muted small">
                "What each group's datasets hold (uploads in progress reserve their declared size). "
                "Lowering a quota deletes nothing: new uploads are refused, with the numbers, until enough is removed."
            </p>
            <FormError message=error(set)/>
            {crate::components::flash::answer(set).map(|g| view! {
                <p class="form-ok" role="status" data-testid="dataset-quota-saved">"Saved the dataset quota of " <strong>{g}</strong></p>
            })}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                <StorageTable rows=rows set=set/>
            </Transition>
        </section>
    }
}

#[component]
fn StorageTable(rows: Polled<Vec<GroupStorage>>, set: ServerAction<SetDatasetQuota>) -> impl IntoView {
    move || {
        rows.get().map(|r| match r {
            Ok(rows) => view! {
                <table class="table">
                    <thead><tr><th>"Group"</th><th>"Used"</th><th>"Quota"</th><th>"Set quota (GB)"</th></tr></thead>
                    <tbody>
                        {rows.into_iter().map(|row| view! { <StorageRow row=row set=set/> }).collect_view()}
                    </tbody>
                </table>
            }
            .into_any(),
            Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
        })
    }
}

#[component]
fn StorageRow(row: GroupStorage, set: ServerAction<SetDatasetQuota>) -> impl IntoView {
    let used = match row.reserved_bytes {
        0 => format_bytes(row.used_bytes),
        r => format!("{} (+{} uploading)", format_bytes(row.used_bytes), format_bytes(r)),
    };
    let quota = if row.own_quota {
        format_bytes(row.quota_bytes)
    } else {
        format!("{} (default)", format_bytes(row.quota_bytes))
    };
    let gb = format!("{}", (row.quota_bytes as f64 / (1u64 << 30) as f64 * 100.0).round() / 100.0);
    let (group, label) = (row.group.clone(), format!("dataset quota of {} in GB", row.group));
    view! {
        <tr data-testid="dataset-storage-row" data-name=row.group.clone()>
            <td>{group.clone()}</td>
            <td>{used}</td>
            <td>{quota}</td>
            <td>
                <ActionForm action=set attr:class="inline">
                    <input type="hidden" name="group" value=group/>
                    <input type="text" name="quota_gb" inputmode="decimal" size="8" value=gb aria-label=label/>
                    <button type="submit">"Save"</button>
                </ActionForm>
            </td>
        </tr>
    }
}
