//! The message under a form when its server function refused.

use crate::error::AppError;
use leptos::prelude::*;

/// The error text of an action's latest result, if it failed. After a no-JS
/// post Leptos restores that result from the redirect's query string, so the
/// message shows either way.
pub fn error_text<T>(value: &Option<Result<T, AppError>>) -> Option<String> {
    match value {
        Some(Err(e)) => Some(e.to_string()),
        _ => None,
    }
}

#[component]
pub fn FormError(#[prop(into)] message: Signal<Option<String>>) -> impl IntoView {
    move || message.get().map(|m| view! { <p class="form-error" role="alert" data-testid="form-error">{m}</p> })
}
