//! Confirming what cannot be undone: with JavaScript a dialog that names
//! what goes (`public/live.js` asks the submit button's `data-confirm`);
//! without it, a box to tick before the form submits. The page renders
//! both; live.js hides the box and lifts its `required`.

use leptos::prelude::*;

/// The box a form without JavaScript needs ticked (the dialog's stand-in).
pub fn tick_to_confirm(text: impl Into<String>) -> impl IntoView {
    let text = text.into();
    view! { <label class="check small nojs-only"><input type="checkbox" required data-nojs-required=""/>" " {text}</label> }
}
