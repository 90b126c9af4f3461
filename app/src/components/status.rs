//! Small pieces that show state: coloured badges and progress bars.
//!
//! Plain functions rather than components: they sit in every row of the
//! longest lists, and a component is a type-erased view (`erase_components`)
//! with its own boxed render futures — measurably slower to render on the
//! server than the few elements it stands for.

use crate::model::machines::{machine_badge, task_badge};
use leptos::prelude::*;

/// A machine's state as a coloured badge.
pub fn machine_state_badge(state: String) -> impl IntoView {
    let class = format!("badge {}", machine_badge(&state));
    view! { <span class=class data-testid="machine-state">{state}</span> }
}

/// A task's state as a coloured badge.
pub fn task_state_badge(state: String) -> impl IntoView {
    let class = format!("badge task {}", task_badge(&state));
    view! { <span class=class data-testid="task-state">{state}</span> }
}

/// A 0–100 progress bar with its number.
pub fn progress_bar(value: i64, label: String) -> impl IntoView {
    let value = value.clamp(0, 100);
    let text = format!("{value}%");
    view! {
        <span class="progress-cell">
            <progress class="progress" max="100" value=value aria-label=label>{text.clone()}</progress>
            <span class="progress-number">{text}</span>
        </span>
    }
}

/// A small outlined label, e.g. "simulated", with its explanation on hover.
pub fn tag(text: &'static str, title: &'static str) -> impl IntoView {
    view! { <span class="tag" title=title>{text}</span> }
}
