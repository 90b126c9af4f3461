//! Notifications: what happened to a user's machines, compute tasks and
//! group, told in the portal and, as each user chooses, by email and
//! webhook.
//!
//! **Outbox.** [`notify`] is called inside the transaction of the event it
//! reports and writes the notification together with one delivery row per
//! channel the user chose for its kind: a notification exists if and only
//! if its event committed, and no delivery is lost to a crash in between.
//! The server's delivery loop ([`deliver::deliver_due`]) claims due rows
//! under a lease (two servers never send one twice), sends them, records
//! every attempt and retries with backoff (`gantry_core::notify`).
//!
//! **A machine is not reclaimed unannounced.** The reclaim warning's
//! notification and deliveries are written in the warning's own commit
//! (`transitions::reclaim::warn`), and a reclaim is queued only for a
//! machine warned before its deadline: by the time a reclaim can happen the
//! warning is already queued for every channel its owner chose.

pub mod deliver;
pub mod email;
pub mod listing;
pub mod settings;
pub mod webhook;

pub use gantry_core::notify::Kind;
pub use listing::{
    deliveries, list, mark_all_read, mark_read, unread_count, DeliveryView, NotificationPage, NotificationView,
};
pub use settings::{regenerate_secret, save_settings, settings, NotificationSettings, SettingsInput};

use crate::{now, PlatformError};
use sqlx::SqliteConnection;

/// A notification for `user_id`, with a delivery row for each channel the
/// user chose for `kind`; call it in the transaction of the event it
/// reports. Returns the notification's id.
pub async fn notify(
    conn: &mut SqliteConnection,
    user_id: i64,
    kind: Kind,
    subject: &str,
    body: &str,
) -> Result<i64, PlatformError> {
    let at = now();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO notifications (user_id, kind, subject, body, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(user_id)
    .bind(kind.as_str())
    .bind(subject)
    .bind(body)
    .bind(at)
    .fetch_one(&mut *conn)
    .await?;
    let chosen: Option<(Option<String>, String, Option<String>, String)> = sqlx::query_as(
        "SELECT email, email_kinds, webhook_url, webhook_kinds FROM notification_settings WHERE user_id = ?",
    )
    .bind(user_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((email, email_kinds, webhook, webhook_kinds)) = chosen else { return Ok(id) };
    let wants = |kinds: &str| gantry_core::notify::parse_kinds(kinds).contains(&kind);
    let targets =
        [("email", email.filter(|_| wants(&email_kinds))), ("webhook", webhook.filter(|_| wants(&webhook_kinds)))];
    for (channel, target) in targets {
        let Some(target) = target else { continue };
        sqlx::query(
            "INSERT INTO notification_deliveries (notification_id, user_id, channel, target, state, next_attempt_at, created_at, updated_at)
             VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
        )
        .bind(id)
        .bind(user_id)
        .bind(channel)
        .bind(&target)
        .bind(at)
        .bind(at)
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    Ok(id)
}

/// [`notify`] for every enabled member of a group (a quota change).
pub async fn notify_group(
    conn: &mut SqliteConnection,
    group_id: i64,
    kind: Kind,
    subject: &str,
    body: &str,
) -> Result<usize, PlatformError> {
    let members: Vec<i64> = sqlx::query_scalar("SELECT id FROM users WHERE group_id = ? AND NOT disabled ORDER BY id")
        .bind(group_id)
        .fetch_all(&mut *conn)
        .await?;
    for user in &members {
        notify(conn, *user, kind, subject, body).await?;
    }
    Ok(members.len())
}

/// A machine's owner, for the events that happen to a machine.
pub async fn notify_machine_owner(
    conn: &mut SqliteConnection,
    machine_id: i64,
    kind: Kind,
    subject: impl FnOnce(&str) -> String,
    body: &str,
) -> Result<Option<i64>, PlatformError> {
    let row: Option<(i64, String)> = sqlx::query_as("SELECT owner_id, name FROM machines WHERE id = ?")
        .bind(machine_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some((owner, name)) = row else { return Ok(None) };
    Ok(Some(notify(conn, owner, kind, &subject(&name), body).await?))
}
