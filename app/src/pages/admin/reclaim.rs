//! Admin → Reclaim: idle-reclaim and hot-GPU settings (audited), group and
//! machine exemptions, and which machines are warned, reclaimed or opted
//! out of rebalancing. The group and machine rows carry their names
//! (`data-name`), so live.js keeps a ticked exempt box with its group or
//! machine when the list changes.

use crate::{
    api::reclaim::{reclaim_admin, ReclaimAdminView, SaveReclaimSettings, SetReclaimExempt},
    components::{
        form_error::{error, FormError},
        list_nav::{use_list_query, Pager},
        poll::Polled,
    },
    model::lists::ListQuery,
};
use gantry_core::{rebalance::HotSettings, reclaim::ReclaimSettings};
use leptos::prelude::*;
use leptos_meta::Title;

fn minutes(secs: i64) -> String {
    let m = secs as f64 / 60.0;
    if m.fract() == 0.0 {
        format!("{m:.0}")
    } else {
        format!("{m:.2}")
    }
}

#[component]
pub fn ReclaimPage() -> impl IntoView {
    let save = ServerAction::<SaveReclaimSettings>::new();
    let exempt = ServerAction::<SetReclaimExempt>::new();
    let query = use_list_query();
    let data = Resource::new(
        move || (save.version().get(), exempt.version().get(), query.get()),
        |(_, _, q)| reclaim_admin(q.page),
    );
    view! {
        <Title text="Reclaim"/>
        <h1>"Idle reclaim and hot GPUs"</h1>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            <ReclaimAdmin data=data save=save exempt=exempt query=query/>
        </Transition>
    }
}

#[component]
fn ReclaimAdmin(
    data: Polled<ReclaimAdminView>,
    save: ServerAction<SaveReclaimSettings>,
    exempt: ServerAction<SetReclaimExempt>,
    query: Memo<ListQuery>,
) -> impl IntoView {
    move || {
        data.get().map(|r| match r {
            Ok(d) => view! { <ReclaimCards d=d save=save exempt=exempt query=query.get()/> }.into_any(),
            Err(e) => view! { <p class="form-error">{e.to_string()}</p> }.into_any(),
        })
    }
}

#[component]
fn ReclaimCards(
    d: ReclaimAdminView,
    save: ServerAction<SaveReclaimSettings>,
    exempt: ServerAction<SetReclaimExempt>,
    query: ListQuery,
) -> impl IntoView {
    let ReclaimAdminView { reclaim, hot, groups, machines, counts, unwatchable } = d;
    view! {
        <section class="card stack" data-testid="reclaim-settings">
            <h2>"Settings"</h2>
            {unwatchable.into_iter().map(|why| view! { <p class="form-error" data-testid="reclaim-unwatchable">{why}</p> }).collect_view()}
            <FormError message=error(save)/>
            {crate::components::flash::answer(save).map(|m| view! { <p class="form-ok" role="status" data-testid="reclaim-saved">{m}</p> })}
            <SettingsForm r=reclaim h=hot save=save/>
        </section>
        <section class="card stack">
            <h2>"Groups"</h2>
            <FormError message=error(exempt)/>
            <table class="table" data-testid="reclaim-groups">
                <thead><tr><th>"Group"</th><th>"Exempt from idle reclaim"</th></tr></thead>
                <tbody>
                    {groups.into_iter().map(|(id, name, ex)| view! {
                        <tr data-name=name.clone()>
                            <td>{name.clone()}</td>
                            <td><ExemptForm kind="group" id=id on=ex exempt=exempt/></td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
        <section class="card stack">
            <h2>"Machines"</h2>
            <table class="table" data-testid="reclaim-machines">
                <thead><tr><th>"Machine"</th><th>"Owner"</th><th>"State"</th><th>"Reclaim deadline (UTC)"</th><th>"Rebalancing"</th><th>"Exempt"</th></tr></thead>
                <tbody>
                    {machines.into_iter().map(|m| view! {
                        <tr data-testid="reclaim-machine" data-name=m.name.clone()>
                            <td><a href=format!("/machines/{}", m.id)>{m.name.clone()}</a></td>
                            <td>{m.owner}</td>
                            <td>{m.state.as_str()}</td>
                            <td>{m.deadline.map(gantry_core::time::format_utc).unwrap_or_else(|| "—".into())}</td>
                            <td>{if m.rebalance_opt_out { "opted out by its owner" } else { "may be moved" }}</td>
                            <td><ExemptForm kind="machine" id=m.id on=m.exempt exempt=exempt/></td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            <Pager base="/admin/reclaim" query=query counts=counts/>
        </section>
    }
}

#[component]
fn SettingsForm(r: ReclaimSettings, h: HotSettings, save: ServerAction<SaveReclaimSettings>) -> impl IntoView {
    view! {
        <ActionForm action=save attr:class="stack">
            <fieldset>
                <legend>"Idle reclaim"</legend>
                <label class="check"><input type="checkbox" name="enabled" checked=r.enabled/>" On"</label>
                <label>"Idle threshold (%) " <input type="number" step="any" name="threshold_pct" value=r.threshold_pct.to_string() data-testid="reclaim-threshold"/></label>
                <label>"Window (minutes) " <input type="number" step="any" name="window_min" value=minutes(r.window_secs) data-testid="reclaim-window"/></label>
                <label>"Grace period (minutes) " <input type="number" step="any" name="grace_min" value=minutes(r.grace_secs) data-testid="reclaim-grace"/></label>
                <label>"Extensions allowed " <input type="number" name="extensions_allowed" value=r.extensions_allowed.to_string() data-testid="reclaim-extensions"/></label>
                <label>"One extension (minutes) " <input type="number" step="any" name="extension_min" value=minutes(r.extension_secs) data-testid="reclaim-extension"/></label>
            </fieldset>
            <fieldset>
                <legend>"Hot-GPU rebalancing"</legend>
                <label class="check"><input type="checkbox" name="hot_enabled" checked=h.enabled/>" On"</label>
                <label>"Utilisation (%) " <input type="number" step="any" name="hot_util_pct" value=h.util_pct.to_string()/></label>
                <label>"Memory used (%) " <input type="number" step="any" name="hot_mem_pct" value=h.mem_pct.to_string()/></label>
                <label>"Temperature (°C) " <input type="number" step="any" name="hot_temp_c" value=h.temp_c.to_string()/></label>
                <label>"Window (minutes) " <input type="number" step="any" name="hot_window_min" value=minutes(h.window_secs)/></label>
            </fieldset>
            <button type="submit" class="primary" data-testid="reclaim-save">"Save settings"</button>
        </ActionForm>
    }
}

#[component]
fn ExemptForm(kind: &'static str, id: i64, on: bool, exempt: ServerAction<SetReclaimExempt>) -> impl IntoView {
    view! {
        <ActionForm action=exempt attr:class="inline">
            <input type="hidden" name="kind" value=kind/>
            <input type="hidden" name="id" value=id/>
            <label class="check"><input type="checkbox" name="exempt" checked=on/>" exempt"</label>
            " " <button type="submit">"Save"</button>
        </ActionForm>
    }
}
