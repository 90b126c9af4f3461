//! Each user's channels: the portal always; email to an address and a
//! webhook to a URL, each for the kinds the user ticks. The webhook's
//! signing secret is made when a URL is first saved (and on request),
//! shown once in the answer, and only ever said to exist afterwards.

use super::{webhook, Kind};
use crate::{accounts::User, audit, now, PlatformError};
use gantry_core::notify::{check_email, join_kinds, parse_kinds};
use serde::{Deserialize, Serialize};

/// What a user chose, as the account page shows it (no secret).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationSettings {
    pub email: Option<String>,
    pub email_kinds: Vec<Kind>,
    pub webhook_url: Option<String>,
    pub webhook_kinds: Vec<Kind>,
    /// Whether a webhook secret exists (it is shown only when made).
    pub has_webhook_secret: bool,
}

/// A save from the account page or the API. An empty address or URL turns
/// that channel off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsInput {
    pub email: String,
    pub email_kinds: Vec<Kind>,
    pub webhook_url: String,
    pub webhook_kinds: Vec<Kind>,
}

/// `who`'s channels (all off until saved once).
pub async fn settings(pool: &crate::db::Pool, who: &User) -> Result<NotificationSettings, PlatformError> {
    let row: Option<(Option<String>, String, Option<String>, String, bool)> = sqlx::query_as(
        "SELECT email, email_kinds, webhook_url, webhook_kinds, webhook_secret IS NOT NULL
         FROM notification_settings WHERE user_id = ?",
    )
    .bind(who.id)
    .fetch_optional(pool)
    .await?;
    Ok(row
        .map(|(email, ek, webhook_url, wk, has_webhook_secret)| NotificationSettings {
            email,
            email_kinds: parse_kinds(&ek),
            webhook_url,
            webhook_kinds: parse_kinds(&wk),
            has_webhook_secret,
        })
        .unwrap_or_default())
}

/// Checks and saves `who`'s channels; a bad address or URL is refused with
/// why, and nothing changes. Answers the saved settings and, when this save
/// made the webhook's first secret, that secret (shown once).
pub async fn save_settings(
    pool: &crate::db::Pool,
    who: &User,
    input: &SettingsInput,
) -> Result<(NotificationSettings, Option<String>), PlatformError> {
    let email = input.email.trim();
    let url = input.webhook_url.trim();
    if !email.is_empty() {
        check_email(email).map_err(PlatformError::BadRequest)?;
    }
    if !url.is_empty() {
        webhook::check_url(url).map_err(PlatformError::BadRequest)?;
    }
    let mut tx = crate::db::begin_immediate(pool).await?;
    let had_secret: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM notification_settings WHERE user_id = ? AND webhook_secret IS NOT NULL)",
    )
    .bind(who.id)
    .fetch_one(&mut *tx)
    .await?;
    let new_secret = (!url.is_empty() && !had_secret).then(webhook::new_secret);
    sqlx::query(
        "INSERT INTO notification_settings (user_id, email, email_kinds, webhook_url, webhook_kinds, webhook_secret, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (user_id) DO UPDATE SET email = ?2, email_kinds = ?3, webhook_url = ?4, webhook_kinds = ?5,
             webhook_secret = COALESCE(?6, webhook_secret), updated_at = ?7",
    )
    .bind(who.id)
    .bind((!email.is_empty()).then_some(email))
    .bind(join_kinds(&input.email_kinds))
    .bind((!url.is_empty()).then_some(url))
    .bind(join_kinds(&input.webhook_kinds))
    .bind(new_secret.as_deref())
    .bind(now())
    .execute(&mut *tx)
    .await?;
    let said = |on: bool, kinds: &[Kind]| if on { format!("{} kind(s)", kinds.len()) } else { "off".to_string() };
    audit::record(
        &mut *tx,
        Some(who.id),
        "notifications.settings",
        &format!(
            "{}: email {}, webhook {}",
            who.username,
            said(!email.is_empty(), &input.email_kinds),
            said(!url.is_empty(), &input.webhook_kinds)
        ),
    )
    .await?;
    tx.commit().await?;
    Ok((settings(pool, who).await?, new_secret))
}

/// A new webhook secret for `who`, replacing the old one at once (the
/// receiver must be given it); answered once. Refused without a webhook.
pub async fn regenerate_secret(pool: &crate::db::Pool, who: &User) -> Result<String, PlatformError> {
    let secret = webhook::new_secret();
    let mut tx = crate::db::begin_immediate(pool).await?;
    let done = sqlx::query(
        "UPDATE notification_settings SET webhook_secret = ?, updated_at = ? WHERE user_id = ? AND webhook_url IS NOT NULL",
    )
    .bind(&secret)
    .bind(now())
    .bind(who.id)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        return Err(PlatformError::Conflict("set a webhook URL first: a secret signs what is sent to it".into()));
    }
    audit::record(&mut *tx, Some(who.id), "notifications.secret", &format!("{}: new webhook secret", who.username))
        .await?;
    tx.commit().await?;
    Ok(secret)
}
