//! The signed-in user's notifications (list, unread count, mark read) and
//! channels (email, webhook and the kinds each gets; the webhook's secret
//! shown once). Thin: every rule is in `gantry_platform::notifications`.

use crate::error::AppError;
use gantry_platform::notifications::{DeliveryView, NotificationPage, NotificationSettings};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// Session key holding a just-made webhook secret for a no-JavaScript form
/// post, until the page it is redirected to shows it (and removes it).
const SECRET_KEY: &str = "new_webhook_secret";

/// One page of the user's notifications, newest first, with the unread count.
#[server(prefix = "/api", endpoint = "my_notifications")]
pub async fn my_notifications(page: Option<String>) -> Result<NotificationPage, AppError> {
    let user = crate::state::auth()?;
    let page = gantry_core::paging::PageRequest::parse(page.as_deref(), None);
    Ok(gantry_platform::notifications::list(&crate::state::pool()?, &user, page).await?)
}

/// The navigation's badge.
#[server(prefix = "/api", endpoint = "unread_notifications")]
pub async fn unread_notifications() -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::notifications::unread_count(&crate::state::pool()?, user.id).await?)
}

#[server(prefix = "/api", endpoint = "mark_notification_read")]
pub async fn mark_notification_read(notification_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    gantry_platform::notifications::mark_read(&crate::state::pool()?, &user, notification_id)
        .await
        .map_err(|e| AppError::from(e).respond())?;
    Ok(notification_id)
}

#[server(prefix = "/api", endpoint = "mark_all_notifications_read")]
pub async fn mark_all_notifications_read() -> Result<u64, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::notifications::mark_all_read(&crate::state::pool()?, &user).await?)
}

/// The user's latest email and webhook deliveries with every attempt.
#[server(prefix = "/api", endpoint = "my_deliveries")]
pub async fn my_deliveries() -> Result<Vec<DeliveryView>, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::notifications::deliveries(&crate::state::pool()?, &user, 50).await?)
}

#[server(prefix = "/api", endpoint = "my_notification_settings")]
pub async fn my_notification_settings() -> Result<NotificationSettings, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::notifications::settings(&crate::state::pool()?, &user).await?)
}

/// What a save answers: the settings, and a webhook secret made by it (once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedSettings {
    pub settings: NotificationSettings,
    pub secret: Option<String>,
}

/// Saves the channels; `*_kinds[]` are the ticked kinds' names. A bad
/// address or URL answers 400 with why, and nothing changes.
#[server(prefix = "/api", endpoint = "save_notification_settings")]
pub async fn save_notification_settings(
    email: Option<String>,
    email_kinds: Option<Vec<String>>,
    webhook_url: Option<String>,
    webhook_kinds: Option<Vec<String>>,
) -> Result<SavedSettings, AppError> {
    use gantry_platform::notifications::{Kind, SettingsInput};
    let user = crate::state::auth()?;
    let kinds = |list: Option<Vec<String>>| -> Result<Vec<Kind>, AppError> {
        list.unwrap_or_default()
            .iter()
            .filter(|v| !v.trim().is_empty())
            .map(|v| v.trim().parse::<Kind>().map_err(|e| AppError::Invalid(e).respond()))
            .collect()
    };
    let input = SettingsInput {
        email: email.unwrap_or_default(),
        email_kinds: kinds(email_kinds)?,
        webhook_url: webhook_url.unwrap_or_default(),
        webhook_kinds: kinds(webhook_kinds)?,
    };
    let (settings, secret) = gantry_platform::notifications::save_settings(&crate::state::pool()?, &user, &input)
        .await
        .map_err(|e| AppError::from(e).respond())?;
    flash_secret(secret.as_deref()).await?;
    Ok(SavedSettings { settings, secret })
}

/// Replaces the webhook secret; the new one is answered once.
#[server(prefix = "/api", endpoint = "regenerate_webhook_secret")]
pub async fn regenerate_webhook_secret() -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let secret = gantry_platform::notifications::regenerate_secret(&crate::state::pool()?, &user)
        .await
        .map_err(|e| AppError::from(e).respond())?;
    flash_secret(Some(&secret)).await?;
    Ok(secret)
}

/// The secret a no-JavaScript save left for the page, removed as it is read.
#[server(prefix = "/api", endpoint = "take_webhook_secret")]
pub async fn take_webhook_secret() -> Result<Option<String>, AppError> {
    crate::state::auth()?;
    let session = session().await?;
    let failed = |e: tower_sessions::session::Error| AppError::internal(e);
    // Looked at first: a removal marks the session changed even when there
    // was nothing to remove (and the page would never be kept).
    if session.get::<String>(SECRET_KEY).await.map_err(failed)?.is_none() {
        return Ok(None);
    }
    session.remove::<String>(SECRET_KEY).await.map_err(failed)
}

/// A plain form post is redirected back to the settings page, which cannot
/// carry the answer: the secret waits in the (server-side) session for that
/// page's one read, never in a URL.
async fn flash_secret(secret: Option<&str>) -> Result<(), AppError> {
    if !crate::api::compute::form_post() {
        return Ok(());
    }
    if let Some(secret) = secret {
        let session = session().await?;
        session.insert(SECRET_KEY, secret).await.map_err(|e| AppError::Internal(e.to_string()))?;
    }
    leptos_axum::redirect("/account/notifications");
    Ok(())
}

async fn session() -> Result<tower_sessions::Session, AppError> {
    leptos_axum::extract::<tower_sessions::Session>()
        .await
        .map_err(|e| AppError::Internal(format!("session unavailable: {e}")))
}
