//! Small pieces that show state: coloured badges and progress bars.
//!
//! Plain functions rather than components: they sit in every row of the
//! longest lists, and a component is a type-erased view (`erase_components`)
//! with its own boxed render futures — measurably slower to render on the
//! server than the few elements it stands for.

use gantry_core::task::{MachineState, TaskState};
use leptos::prelude::*;

/// A machine's state as a coloured badge.
pub fn machine_state_badge(state: MachineState) -> impl IntoView {
    let class = format!("badge {state}");
    view! { <span class=class data-testid="machine-state">{state.as_str()}</span> }
}

/// A task's state as a coloured badge.
pub fn task_state_badge(state: TaskState) -> impl IntoView {
    let class = format!("badge task {state}");
    view! { <span class=class data-testid="task-state">{state.as_str()}</span> }
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
