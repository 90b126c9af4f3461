//! "What to do next" on the dashboard, shown only while something stands
//! between the user and a first machine: no quota in their group, or no
//! ready node. Admins get links to fix it; users are told whom to ask.

use crate::{api::dashboard::NextSteps, signed_in};
use leptos::prelude::*;

/// Nothing when the user can go ahead.
#[component]
pub fn NextStepsCard(steps: NextSteps) -> impl IntoView {
    let admin = signed_in().is_some_and(|m| m.is_admin());
    if steps.group_has_quota && steps.ready_nodes > 0 {
        return ().into_any();
    }
    let quota = (!steps.group_has_quota).then(|| {
        if admin {
            view! { <li data-testid="next-quota">"Your group " <strong>{steps.group.clone()}</strong> " has no GPU quota: " <a href="/admin/groups">"set one on the Groups page"</a> "."</li> }.into_any()
        } else {
            view! { <li data-testid="next-quota">"Your group " <strong>{steps.group.clone()}</strong> " has no GPU quota yet: ask an administrator to set one."</li> }.into_any()
        }
    });
    let nodes = (steps.ready_nodes == 0).then(|| {
        if admin {
            view! { <li data-testid="next-nodes">"No worker node is ready: " <a href="/admin/nodes">"add or check a node on the Nodes page"</a> "."</li> }.into_any()
        } else {
            view! { <li data-testid="next-nodes">"No worker node is ready to run machines: an administrator has been told on their dashboard."</li> }.into_any()
        }
    });
    view! {
        <section class="card next-steps" data-testid="next-steps">
            <h2>"What to do next"</h2>
            <ul>{quota}{nodes}</ul>
            <p class="muted">"Once both are in place, " <a href="/machines">"create a machine"</a> "."</p>
        </section>
    }
    .into_any()
}
