//! Small pieces that show state: coloured badges and progress bars.

use crate::model::machines::{machine_badge, task_badge};
use leptos::prelude::*;

/// A machine's state as a coloured badge.
#[component]
pub fn MachineBadge(state: String) -> impl IntoView {
    let class = format!("badge {}", machine_badge(&state));
    view! { <span class=class data-testid="machine-state">{state}</span> }
}

/// A task's state as a coloured badge.
#[component]
pub fn TaskBadge(state: String) -> impl IntoView {
    let class = format!("badge task {}", task_badge(&state));
    view! { <span class=class data-testid="task-state">{state}</span> }
}

/// A 0–100 progress bar with its number.
#[component]
pub fn Progress(value: i64, #[prop(into)] label: String) -> impl IntoView {
    let value = value.clamp(0, 100);
    view! {
        <span class="progress-cell">
            <progress class="progress" max="100" value=value aria-label=label>{format!("{value}%")}</progress>
            <span class="progress-number">{format!("{value}%")}</span>
        </span>
    }
}

/// A small outlined label, e.g. "simulated".
#[component]
pub fn Tag(#[prop(into)] text: String, #[prop(optional, into)] title: Option<String>) -> impl IntoView {
    view! { <span class="tag" title=title>{text}</span> }
}
