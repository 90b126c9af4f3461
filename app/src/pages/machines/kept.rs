//! The "Kept volumes" card: data volumes kept when their machine was
//! deleted. A new machine can be created on one (the create form's "Data
//! volume"); deleting one removes its data from its node for good.

use crate::{
    api::volumes::DeleteKeptVolume,
    components::{
        form_error::{error, FormError},
        status::tag,
    },
    error::AppError,
};
use gantry_platform::machines::KeptVolumeView;
use leptos::prelude::*;

#[component]
pub fn KeptVolumes(
    kept: Resource<Result<Vec<KeptVolumeView>, AppError>>,
    delete: ServerAction<DeleteKeptVolume>,
) -> impl IntoView {
    view! {
        <section class="card stack" data-testid="kept-volumes">
            <h2>"Kept volumes"</h2>
            <FormError message=error(delete)/>
            {crate::components::flash::answer(delete).map(|name| view! {
                <p class="form-ok" role="status" data-testid="kept-deleted">"Volume " <code>{name}</code> " deleted."</p>
            })}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || kept.get().map(|r| match r {
                    Ok(list) if list.is_empty() => view! {
                        <p class="muted" data-testid="no-kept-volumes">"No kept volumes. Deleting a machine with “Keep the data volume” keeps its data here."</p>
                    }.into_any(),
                    Ok(list) => view! { <KeptTable list=list delete=delete/> }.into_any(),
                    Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn KeptTable(list: Vec<KeptVolumeView>, delete: ServerAction<DeleteKeptVolume>) -> impl IntoView {
    view! {
        <table class="table" data-testid="kept-volume-list">
            <thead>
                <tr><th>"Volume"</th><th>"Size"</th><th>"Node"</th><th>"From machine"</th><th>"Owner"</th><th>"Kept (UTC)"</th><th></th></tr>
            </thead>
            <tbody>
                {list.into_iter().map(|v| {
                    let question = format!("Delete volume {}? Its data is removed from node {} for good.", v.name, v.node);
                    let delete_label = format!("Delete volume {}", v.name);
                    view! {
                        <tr data-testid="kept-volume" data-name=v.name.clone()>
                            <td><code>{v.name.clone()}</code></td>
                            <td class="nowrap">
                                {format!("{} GB", v.size_gb)}
                                {(!v.enforced).then(|| view! { " " {tag("size not enforced", "a plain Docker volume: the size is not a hard limit on its node")} })}
                            </td>
                            <td>{v.node.clone()}</td>
                            <td>{v.from_machine.clone()}</td>
                            <td>{v.owner.clone()}</td>
                            <td class="nowrap">{gantry_core::time::format_utc(v.kept_at)}</td>
                            <td>
                                <ActionForm action=delete attr:class="inline wrap">
                                    <input type="hidden" name="volume_id" value=v.id/>
                                    // Without JavaScript the box stands in for live.js' dialog.
                                    <label class="check small nojs-only"><input type="checkbox" required data-nojs-required=""/>" delete its data"</label>
                                    <button type="submit" class="danger" data-confirm=question
                                        aria-label=delete_label>"Delete"</button>
                                </ActionForm>
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}
