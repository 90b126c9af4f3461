//! Confirming what cannot be undone: with JavaScript a dialog that names
//! what goes; without it, a box to tick before the form submits.

use leptos::prelude::*;

/// A click handler that asks `question` and stops the submit on "Cancel".
pub fn ask_first(question: String) -> impl Fn(leptos::ev::MouseEvent) + 'static {
    move |ev| {
        if !window().confirm_with_message(&question).unwrap_or(false) {
            ev.prevent_default();
        }
    }
}

/// True once the page runs its JavaScript (false in the server's HTML).
pub fn hydrated() -> RwSignal<bool> {
    let js = RwSignal::new(false);
    Effect::new(move |_| js.set(true));
    js
}

/// The box a form without JavaScript needs ticked (the dialog's stand-in).
#[component]
pub fn TickToConfirm(js: RwSignal<bool>, text: &'static str) -> impl IntoView {
    move || (!js.get()).then(|| view! { <label class="check small"><input type="checkbox" required/>" " {text}</label> })
}
