//! The message under a form when its server function refused.

use leptos::prelude::*;

/// The refusal of the form just posted with this action (kept for the page
/// by the server, see `flash`).
pub use super::flash::error;

#[component]
pub fn FormError(message: Option<String>) -> impl IntoView {
    message.map(|m| view! { <p class="form-error" role="alert" data-testid="form-error">{m}</p> })
}
