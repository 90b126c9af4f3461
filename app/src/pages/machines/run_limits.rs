//! Admin → Groups: each group's longest run without a stop (hours, 0 = no
//! limit). A machine past it is warned first (the idle reclaim's warning
//! window), then stopped with its filesystem kept.

use crate::{
    api::schedules::{group_max_runs, SetGroupMaxRun},
    components::form_error::{error, FormError},
};
use leptos::prelude::*;

#[component]
pub fn GroupRunLimits() -> impl IntoView {
    let save = ServerAction::<SetGroupMaxRun>::new();
    let limits = Resource::new(
        move || save.version().get(),
        |_| async {
            let names = crate::api::admin::list_groups().await?;
            let hours = group_max_runs().await?;
            Ok::<_, crate::error::AppError>(
                names
                    .into_iter()
                    .map(|g| (g.id, g.name, hours.iter().find(|(id, _)| *id == g.id).map_or(0, |h| h.1)))
                    .collect::<Vec<_>>(),
            )
        },
    );
    view! {
        <section class="card stack" data-testid="group-run-limits">
            <h2>"Longest run without a stop"</h2>
            <p class="muted small">
                "Hours a machine of the group may run before it is stopped (0: no limit). Its owner is warned first, "
                "as the idle reclaim warns; the stop keeps its filesystem and data volume, and Start brings it back."
            </p>
            <FormError message=error(save)/>
            <Transition fallback=|| ()>
                {move || limits.get().and_then(Result::ok).map(|rows| rows.into_iter().map(|(id, name, hours)| view! {
                    <ActionForm action=save attr:class="inline" attr:data-testid="group-max-run-form">
                        <input type="hidden" name="group_id" value=id/>
                        <label>{name.clone()} " "
                            <input type="number" name="max_run_hours" min="0" max="8760" step="1" required value=hours.to_string()
                                attr:data-group=name/>
                        " h "</label>
                        <button type="submit">"Save"</button>
                    </ActionForm>
                }).collect_view())}
            </Transition>
        </section>
    }
}
