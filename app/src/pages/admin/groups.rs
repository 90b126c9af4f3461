//! Groups and their GPU policy: list, create, and edit quota, most GPUs
//! per machine, allowed GPU models, images and regions (checkboxes that post
//! as a plain form); below, their dataset storage. Each group's policy form
//! carries its group's name (`data-name`), so live.js keeps what was typed
//! in its group's form through a refused save, a save of another group, or
//! a group added above it.

use crate::{
    api::{
        admin::{list_groups, CreateGroup},
        fleet::{group_access, GroupAccessChoices, GroupAccessRow, UpdateGroup},
    },
    components::{
        form_error::{error, FormError},
        poll::Polled,
    },
};
use gantry_platform::accounts::Group;
use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn GroupsPage() -> impl IntoView {
    let create = ServerAction::<CreateGroup>::new();
    let update = ServerAction::<UpdateGroup>::new();
    let groups = Resource::new(move || (create.version().get(), update.version().get()), |_| list_groups());
    let access = Resource::new(move || (create.version().get(), update.version().get()), |_| group_access());
    view! {
        <Title text="Groups"/>
        <h1>"Groups"</h1>
        <div class="grid two">
            <section class="card">
                <h2>"New group"</h2>
                <ActionForm action=create attr:class="stack">
                    <label>"Name" <input type="text" name="name" required maxlength="64"/></label>
                    <label>"GPU quota" <input type="number" name="gpu_quota" min="0" value="0" required/></label>
                    <FormError message=error(create)/>
                    <button type="submit" class="primary">"Create group"</button>
                </ActionForm>
            </section>
            <section class="card">
                <h2>"All groups"</h2>
                <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                    {move || groups.get().map(|r| match r {
                        Ok(list) => {
                        let access = access.get().and_then(Result::ok).unwrap_or_default();
                        // Nine columns are wider than their card: the table
                        // scrolls in a region the keyboard can reach and
                        // scroll (it holds no link or field to tab to).
                        view! {
                            <div class="table-scroll" role="region" aria-label="All groups" tabindex="0">
                            <table class="table" data-testid="groups">
                                <thead><tr><th>"Name"</th><th>"GPUs in use / quota"</th><th>"Max per machine"</th><th>"Snapshots"</th><th>"Disk"</th><th>"Allowed models"</th><th>"Images"</th><th>"Regions"</th><th>"Members"</th></tr></thead>
                                <tbody>
                                    {list.into_iter().map(|g| {
                                        let over = g.gpus_in_use > g.gpu_quota;
                                        let allowed = access.of(g.id);
                                        view! {
                                            <tr data-testid="group-row" data-name=g.name.clone()>
                                                <td>{g.name.clone()}</td>
                                                <td>
                                                    {format!("{} / {}", g.gpus_in_use, g.gpu_quota)}
                                                    {over.then(|| view! { " " <span class="tag warn" title="holds more than its quota: new requests are refused until enough is released">"over quota"</span> })}
                                                </td>
                                                <td>{format!("{} GPUs · {} CPUs · {} GB", g.max_gpus_per_machine, g.max_cpus_per_machine, g.max_memory_gb_per_machine)}</td>
                                                <td data-testid="group-snapshot-quota">{g.snapshot_quota}</td>
                                                <td data-testid="group-disk">{disk_label(&g)}</td>
                                                <td>{models_label(&g.allowed_models)}</td>
                                                <td data-testid="group-images">{names_label(&allowed.images)}</td>
                                                <td data-testid="group-regions">{names_label(&allowed.regions)}</td>
                                                <td>{g.members}</td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                            </div>
                        }.into_any()
                        }
                        Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
                    })}
                </Transition>
            </section>
        </div>
        <section class="card">
            <h2>"Edit group policy"</h2>
            <p class="muted small">
                "Lowering a quota below what a group holds now takes nothing away: its machines keep their GPUs, "
                "and new requests are refused until enough is released. Allowed models are comma-separated; empty means any model. "
                "Images and regions: tick the ones the group may use; none ticked means all of them. "
                "Machines already placed keep their image and region."
            </p>
            <FormError message=error(update)/>
            {move || crate::components::flash::answer(update).map(|g| view! {
                <p class="form-ok" role="status" data-testid="group-saved">"Saved group " <strong>{g.name}</strong></p>
            })}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                <PolicyForms groups=groups access=access update=update/>
            </Transition>
        </section>
        <super::dataset_quotas::DatasetQuotas/>
        <crate::pages::machines::run_limits::GroupRunLimits/>
    }
}

/// "50 GB per machine · 500 GB of snapshots" (0: no limit).
fn disk_label(g: &Group) -> String {
    use gantry_core::disk::format_limit_mb;
    format!(
        "{} per machine outside /data · {} of snapshots",
        format_limit_mb(g.root_disk_mb),
        format_limit_mb(g.snapshot_disk_mb)
    )
}

/// A limit in MB as the form's GB field shows it ("50", "0.02").
fn gb_value(mb: i64) -> String {
    if mb % 1000 == 0 {
        (mb / 1000).to_string()
    } else {
        format!("{}.{:03}", mb / 1000, mb % 1000).trim_end_matches('0').to_string()
    }
}

/// "all" for an empty allow-list, else the names.
fn names_label(list: &[(i64, String)]) -> String {
    if list.is_empty() {
        "all".to_string()
    } else {
        list.iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>().join(", ")
    }
}

fn models_label(models: &[String]) -> String {
    if models.is_empty() {
        "any".to_string()
    } else {
        models.join(", ")
    }
}

/// What one group's policy form shows: the group, and each image and
/// region with whether the group may use it.
#[derive(Clone, PartialEq)]
struct Policy {
    group: Group,
    images: Vec<(i64, String, bool)>,
    regions: Vec<(i64, String, bool)>,
}

impl Policy {
    fn of(group: Group, choices: &GroupAccessChoices) -> Self {
        let GroupAccessRow { images, regions, .. } = choices.of(group.id);
        let image_ids: Vec<i64> = images.iter().map(|(id, _)| *id).collect();
        let region_ids: Vec<i64> = regions.iter().map(|(id, _)| *id).collect();
        Policy {
            images: choices.images.iter().map(|(id, n)| (*id, n.clone(), image_ids.contains(id))).collect(),
            regions: choices
                .regions
                .iter()
                .map(|(id, code, n)| (*id, format!("{code} ({n})"), region_ids.contains(id)))
                .collect(),
            group,
        }
    }
}

#[component]
fn PolicyForms(
    groups: Polled<Vec<Group>>,
    access: Polled<GroupAccessChoices>,
    update: ServerAction<UpdateGroup>,
) -> impl IntoView {
    // Without the groups' current images and regions the forms would post
    // empty lists, which mean "all": no form then, rather than one that
    // widens a group.
    move || {
        let (groups, access) = (groups.get()?, access.get()?);
        Some(match (groups, access) {
            (Ok(list), Ok(choices)) => view! {
                <div class="policy-list">
                    {list.into_iter().map(|g| view! { <GroupPolicyForm policy=Policy::of(g, &choices) update=update/> }).collect_view()}
                </div>
            }
            .into_any(),
            (Err(e), _) | (_, Err(e)) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
        })
    }
}

#[component]
fn GroupPolicyForm(policy: Policy, update: ServerAction<UpdateGroup>) -> impl IntoView {
    let Policy { group: g, images, regions } = policy;
    let name = g.name.clone();
    view! {
        <ActionForm action=update attr:class="policy" attr:data-testid="group-policy" attr:data-name=name>
            <fieldset>
                <legend>{g.name.clone()} <span class="muted small">{format!(" · {} GPU(s) in use", g.gpus_in_use)}</span></legend>
                <input type="hidden" name="group_id" value=g.id/>
                // The revision these values are from: a save after someone
                // else's edit is refused instead of writing them back.
                <input type="hidden" name="policy_rev" value=g.policy_rev/>
                <label>"GPU quota"
                    <input type="number" name="gpu_quota" min="0" max="100000" step="1" value=g.gpu_quota required/>
                </label>
                <label>"Max GPUs per machine"
                    <input type="number" name="max_gpus_per_machine" min="1" max="64" step="1" value=g.max_gpus_per_machine required/>
                </label>
                <label>"Allowed GPU models"
                    <input type="text" name="allowed_models" value=g.allowed_models.join(", ") placeholder="any" maxlength="2000"/>
                </label>
                <AccessChecks legend="Allowed images" field="allowed_images[]" testid="group-image-choices" choices=images/>
                <AccessChecks legend="Allowed regions" field="allowed_regions[]" testid="group-region-choices" choices=regions/>
                <label>"Max CPUs per machine"
                    <input type="number" name="max_cpus_per_machine" min="1" max="256" step="1" value=g.max_cpus_per_machine required/>
                </label>
                <label>"Max memory per machine (GB)"
                    <input type="number" name="max_memory_gb_per_machine" min="1" max="4096" step="1" value=g.max_memory_gb_per_machine required/>
                </label>
                <label>"Snapshots its members may keep"
                    <input type="number" name="snapshot_quota" min="0" max="1000" step="1" value=g.snapshot_quota required/>
                </label>
                <label>"Root filesystem per machine (GB, outside /data; 0 = no limit)"
                    <input type="number" name="root_disk_gb" min="0" max="1000000" step="0.001" value=gb_value(g.root_disk_mb) required/>
                </label>
                <label>"Snapshot storage (GB; 0 = no limit)"
                    <input type="number" name="snapshot_disk_gb" min="0" max="1000000" step="0.001" value=gb_value(g.snapshot_disk_mb) required/>
                </label>
                <button type="submit">"Save"</button>
            </fieldset>
        </ActionForm>
    }
}

/// One allow-list as checkboxes named `field` (`allowed_images[]`): the
/// hidden empty entry makes the form send the field even with none ticked,
/// which the server reads as "all"; ids of the ticked ones follow.
#[component]
fn AccessChecks(
    legend: &'static str,
    field: &'static str,
    testid: &'static str,
    choices: Vec<(i64, String, bool)>,
) -> impl IntoView {
    view! {
        <fieldset class="checks" data-testid=testid>
            <legend>{legend} <span class="muted small">" · none ticked = all"</span></legend>
            <input type="hidden" name=field value=""/>
            {choices.into_iter().map(|(id, label, checked)| view! {
                <label class="check"><input type="checkbox" name=field value=id checked=checked/>" " {label}</label>
            }).collect_view()}
        </fieldset>
    }
}
