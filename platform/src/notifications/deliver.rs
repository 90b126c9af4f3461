//! One pass of the delivery loop: claim the due deliveries under a lease
//! (in one `BEGIN IMMEDIATE` commit, so two servers never claim one row),
//! send them, and record each attempt; a failure is retried after
//! `gantry_core::notify::retry_after` and given up after `MAX_ATTEMPTS`.
//! A claim whose process died is claimed again once its lease runs out.

use super::{email::Mailer, webhook::WebhookClient};
use crate::{db::Pool, PlatformError};
use futures_util::{stream, StreamExt};
use gantry_core::notify::retry_after;
use std::sync::OnceLock;

/// How long a claim holds: longer than the slowest send (SMTP's and the
/// webhook's timeouts), so only a process that stopped loses its claims.
pub const LEASE_SECS: i64 = 120;
/// Deliveries claimed per pass, and sent at once.
const BATCH: i64 = 32;
const AT_ONCE: usize = 8;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DeliverReport {
    pub sent: Vec<i64>,
    /// Failed this time and scheduled again.
    pub retrying: Vec<i64>,
    /// Failed for the last time.
    pub failed: Vec<i64>,
}

struct Claimed {
    id: i64,
    attempt: i64,
    channel: String,
    target: String,
    notification_id: i64,
    kind: String,
    subject: String,
    body: String,
    created_at: i64,
    secret: Option<String>,
}

/// This process's claim owner (one per process, like the dispatcher's).
fn owner() -> &'static str {
    static OWNER: OnceLock<String> = OnceLock::new();
    OWNER.get_or_init(|| format!("notify-{}-{:08x}", std::process::id(), rand::random::<u32>()))
}

/// Sends every delivery due at `now` (unix seconds; tests pass their own
/// clock to drive retries) and records how each went.
pub async fn deliver_due(
    pool: &Pool,
    now: i64,
    mailer: &Mailer,
    http: &WebhookClient,
) -> Result<DeliverReport, PlatformError> {
    let claimed = claim(pool, now).await?;
    let outcomes: Vec<(Claimed, super::webhook::Outcome)> = stream::iter(claimed)
        .map(|c| async move {
            let outcome = send(&c, now, mailer, http).await;
            (c, outcome)
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let mut report = DeliverReport::default();
    for (c, outcome) in outcomes {
        match record(pool, &c, now, &outcome).await? {
            Some(true) => report.sent.push(c.id),
            Some(false) if retry_after(c.attempt).is_some() => report.retrying.push(c.id),
            Some(false) => report.failed.push(c.id),
            None => {}
        }
    }
    Ok(report)
}

async fn claim(pool: &Pool, now: i64) -> Result<Vec<Claimed>, PlatformError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    type Row = (i64, i64, String, String, i64, String, String, String, i64, Option<String>);
    let rows: Vec<Row> = sqlx::query_as(
        "UPDATE notification_deliveries SET state = 'sending', lease_owner = ?1, lease_expires = ?2 + ?3,
                attempts = attempts + 1, updated_at = ?2
         WHERE id IN (SELECT id FROM notification_deliveries
                      WHERE (state = 'pending' AND next_attempt_at <= ?2) OR (state = 'sending' AND lease_expires <= ?2)
                      ORDER BY id LIMIT ?4)
         RETURNING id, attempts, channel, target, notification_id,
                   (SELECT kind FROM notifications n WHERE n.id = notification_id),
                   (SELECT subject FROM notifications n WHERE n.id = notification_id),
                   (SELECT body FROM notifications n WHERE n.id = notification_id),
                   (SELECT created_at FROM notifications n WHERE n.id = notification_id),
                   (SELECT webhook_secret FROM notification_settings s WHERE s.user_id = notification_deliveries.user_id)",
    )
    .bind(owner())
    .bind(now)
    .bind(LEASE_SECS)
    .bind(BATCH)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows
        .into_iter()
        .map(|(id, attempt, channel, target, notification_id, kind, subject, body, created_at, secret)| Claimed {
            id,
            attempt,
            channel,
            target,
            notification_id,
            kind,
            subject,
            body,
            created_at,
            secret,
        })
        .collect())
}

async fn send(c: &Claimed, now: i64, mailer: &Mailer, http: &WebhookClient) -> super::webhook::Outcome {
    use super::webhook::Outcome;
    match c.channel.as_str() {
        "email" => match mailer.send(&c.target, &c.subject, &c.body).await {
            Ok(()) => Outcome { ok: true, status: None, error: None },
            Err(error) => Outcome { ok: false, status: None, error: Some(error) },
        },
        _ => {
            let Some(secret) = &c.secret else {
                return Outcome { ok: false, status: None, error: Some("no webhook secret is set".into()) };
            };
            let body = serde_json::json!({
                "delivery_id": c.id,
                "notification_id": c.notification_id,
                "kind": c.kind,
                "subject": c.subject,
                "body": c.body,
                "created_at": c.created_at,
                "sent_at": now,
                "attempt": c.attempt,
            });
            http.post(&c.target, secret, c.id, body.to_string().as_bytes()).await
        }
    }
}

/// Records the attempt under this claim; `None` when the claim was lost
/// (another process took the row over after our lease ran out).
async fn record(
    pool: &Pool,
    c: &Claimed,
    now: i64,
    outcome: &super::webhook::Outcome,
) -> Result<Option<bool>, PlatformError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    let (state, next) = match (outcome.ok, retry_after(c.attempt)) {
        (true, _) => ("sent", now),
        (false, Some(wait)) => ("pending", now + wait),
        (false, None) => ("failed", now),
    };
    let done = sqlx::query(
        "UPDATE notification_deliveries SET state = ?, next_attempt_at = ?, last_error = ?, lease_owner = NULL,
                lease_expires = NULL, updated_at = ?
         WHERE id = ? AND state = 'sending' AND lease_owner = ? AND attempts = ?",
    )
    .bind(state)
    .bind(next)
    .bind(&outcome.error)
    .bind(now)
    .bind(c.id)
    .bind(owner())
    .bind(c.attempt)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(None);
    }
    sqlx::query("INSERT INTO notification_attempts (delivery_id, attempt, at, ok, status_code, error) VALUES (?, ?, ?, ?, ?, ?)")
        .bind(c.id)
        .bind(c.attempt)
        .bind(now)
        .bind(outcome.ok)
        .bind(outcome.status.map(i64::from))
        .bind(&outcome.error)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(outcome.ok))
}
