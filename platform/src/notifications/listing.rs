//! A user's own notifications (newest first, read or unread) and their
//! deliveries with every attempt. Every query is bound to the asking user:
//! another user's rows are never listed, counted or marked.

use super::Kind;
use crate::{accounts::User, db::Pool, now, PlatformError};
use gantry_core::paging::PageRequest;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationView {
    pub id: i64,
    /// The stored kind's name (a kind this build does not know stays listed).
    pub kind: String,
    pub subject: String,
    pub body: String,
    pub created_at: i64,
    pub read_at: Option<i64>,
}

impl NotificationView {
    pub fn kind_label(&self) -> String {
        self.kind.parse::<Kind>().map(|k| k.label().to_string()).unwrap_or_else(|_| self.kind.clone())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationPage {
    pub items: Vec<NotificationView>,
    pub unread: i64,
    pub total: i64,
    pub page: i64,
    pub per_page: i64,
}

/// One page of `who`'s notifications, newest first, with the unread count.
pub async fn list(pool: &Pool, who: &User, page: PageRequest) -> Result<NotificationPage, PlatformError> {
    let rows: Vec<(i64, String, String, String, i64, Option<i64>)> = sqlx::query_as(
        "SELECT id, kind, subject, body, created_at, read_at FROM notifications WHERE user_id = ?
         ORDER BY id DESC LIMIT ? OFFSET ?",
    )
    .bind(who.id)
    .bind(page.per_page)
    .bind(page.offset())
    .fetch_all(pool)
    .await?;
    let total: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM notifications WHERE user_id = ?").bind(who.id).fetch_one(pool).await?;
    Ok(NotificationPage {
        items: rows
            .into_iter()
            .map(|(id, kind, subject, body, created_at, read_at)| NotificationView {
                id,
                kind,
                subject,
                body,
                created_at,
                read_at,
            })
            .collect(),
        unread: unread_count(pool, who.id).await?,
        total,
        page: page.page,
        per_page: page.per_page,
    })
}

/// How many of `user_id`'s notifications are unread (the navigation's badge).
pub async fn unread_count(pool: &Pool, user_id: i64) -> Result<i64, PlatformError> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM notifications WHERE user_id = ? AND read_at IS NULL")
        .bind(user_id)
        .fetch_one(pool)
        .await?)
}

/// Marks one of `who`'s notifications read; another user's (or none) is
/// "not found". Marking a read one again changes nothing.
pub async fn mark_read(pool: &Pool, who: &User, id: i64) -> Result<(), PlatformError> {
    let done = sqlx::query("UPDATE notifications SET read_at = COALESCE(read_at, ?) WHERE id = ? AND user_id = ?")
        .bind(now())
        .bind(id)
        .bind(who.id)
        .execute(pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(PlatformError::NotFound("notification".into()));
    }
    Ok(())
}

/// Marks all of `who`'s notifications read; how many were unread.
pub async fn mark_all_read(pool: &Pool, who: &User) -> Result<u64, PlatformError> {
    let done = sqlx::query("UPDATE notifications SET read_at = ? WHERE user_id = ? AND read_at IS NULL")
        .bind(now())
        .bind(who.id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// One attempt of a delivery, as listed for its user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptView {
    pub attempt: i64,
    pub at: i64,
    pub ok: bool,
    pub status_code: Option<i64>,
    pub error: Option<String>,
}

/// A delivery of one notification by email or webhook, with its attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryView {
    pub id: i64,
    pub notification_id: i64,
    pub subject: String,
    pub channel: String,
    pub target: String,
    /// pending, sending, sent or failed (given up).
    pub state: String,
    pub attempts: i64,
    /// When it is tried next, while pending.
    pub next_attempt_at: Option<i64>,
    pub last_error: Option<String>,
    pub tries: Vec<AttemptView>,
}

/// `who`'s latest `limit` deliveries (newest first), each with its attempts.
pub async fn deliveries(pool: &Pool, who: &User, limit: i64) -> Result<Vec<DeliveryView>, PlatformError> {
    type Row = (i64, i64, String, String, String, String, i64, i64, Option<String>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT d.id, d.notification_id, n.subject, d.channel, d.target, d.state, d.attempts, d.next_attempt_at, d.last_error
         FROM notification_deliveries d JOIN notifications n ON n.id = d.notification_id
         WHERE d.user_id = ? ORDER BY d.id DESC LIMIT ?",
    )
    .bind(who.id)
    .bind(limit.clamp(1, 200))
    .fetch_all(pool)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, notification_id, subject, channel, target, state, attempts, next, last_error) in rows {
        let tries: Vec<(i64, i64, bool, Option<i64>, Option<String>)> = sqlx::query_as(
            "SELECT attempt, at, ok, status_code, error FROM notification_attempts WHERE delivery_id = ? ORDER BY id",
        )
        .bind(id)
        .fetch_all(pool)
        .await?;
        out.push(DeliveryView {
            id,
            notification_id,
            subject,
            channel,
            target,
            next_attempt_at: (state == "pending").then_some(next),
            state,
            attempts,
            last_error,
            tries: tries
                .into_iter()
                .map(|(attempt, at, ok, status_code, error)| AttemptView { attempt, at, ok, status_code, error })
                .collect(),
        });
    }
    Ok(out)
}
