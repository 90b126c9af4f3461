//! Terminal sessions: one row per open terminal (who, which machine, when,
//! which server process), audit rows at open and close (with how long it
//! was open), admins' close requests, and the per-process registry that
//! delivers a close to the WebSocket holding the session.
//!
//! Each server process runs one watcher (started with its registry). Every
//! [`WATCH_EVERY`] it reads, in one query, the state of the machines of its
//! open sessions and any close requests, and signals the sessions concerned:
//! a machine that left `running` (stopped, restarting, deleted — usually
//! already seen as the end of the shell's output stream), an account that
//! lost its sessions (disabled, demoted, password reset), or an admin's
//! close. It also renews its sessions' `seen_at`, closes sessions of
//! processes that stopped renewing theirs (a crashed server), and closes
//! its own rows that no terminal holds (a request cut off between writing
//! the row and registering the terminal).

use super::CloseReason;
use crate::{accounts::User, audit, db::Pool, now, PlatformError};
use serde::Serialize;
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::sync::watch;

/// How often the watcher looks at the machines and close requests.
pub const WATCH_EVERY: Duration = Duration::from_secs(2);
/// How often open sessions' `seen_at` is renewed.
const RENEW_EVERY_TICKS: u32 = 5;
/// A session not renewed for this long belongs to a process that died.
const STALE_AFTER_SECS: i64 = 60;

/// An open or recently closed session, as the admin console lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct SessionView {
    pub id: i64,
    pub machine_id: i64,
    pub machine: String,
    pub user: String,
    pub client_addr: String,
    pub server: String,
    pub opened_at: i64,
    pub closed_at: Option<i64>,
    pub close_reason: String,
    pub close_requested: bool,
}

/// Records a new session and its audit row; returns its id.
pub async fn open(
    pool: &Pool,
    user: &User,
    machine_id: i64,
    machine: &str,
    server: &str,
    client_addr: &str,
) -> Result<i64, PlatformError> {
    let at = now();
    let mut tx = pool.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO terminal_sessions (machine_id, user_id, user_gen, server, client_addr, opened_at, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(machine_id)
    .bind(user.id)
    .bind(user.session_gen)
    .bind(server)
    .bind(client_addr)
    .bind(at)
    .bind(at)
    .fetch_one(&mut *tx)
    .await?;
    audit::record(
        &mut *tx,
        Some(user.id),
        "terminal.open",
        &format!("terminal #{id} on machine {machine} opened from {client_addr}"),
    )
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// Closes a session (once) with its reason; the audit row says how long
/// it was open.
pub async fn close(pool: &Pool, id: i64, reason: &str) -> Result<(), PlatformError> {
    let at = now();
    let mut tx = pool.begin().await?;
    let row: Option<(i64, i64, String)> = sqlx::query_as(
        "UPDATE terminal_sessions SET closed_at = ?, close_reason = ?
         WHERE id = ? AND closed_at IS NULL
         RETURNING user_id, opened_at, (SELECT name FROM machines WHERE id = machine_id)",
    )
    .bind(at)
    .bind(reason)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some((user_id, opened_at, machine)) = row {
        let detail =
            format!("terminal #{id} on machine {machine} closed after {}: {reason}", duration_text(at - opened_at));
        audit::record(&mut *tx, Some(user_id), "terminal.close", &detail).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// An admin asks for a session to be closed; the process holding it
/// closes it within one watcher period. Closing a closed session is a
/// no-op; an unknown one is "not found".
pub async fn request_close(pool: &Pool, admin: &User, id: i64) -> Result<(), PlatformError> {
    if !admin.role.is_admin() {
        return Err(PlatformError::Refused("only administrators may close other people's terminals".into()));
    }
    let mut tx = pool.begin().await?;
    let row: Option<(Option<i64>, String, String)> = sqlx::query_as(
        "SELECT ts.closed_at, u.username, m.name FROM terminal_sessions ts
         JOIN users u ON u.id = ts.user_id JOIN machines m ON m.id = ts.machine_id WHERE ts.id = ?",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let (closed_at, user, machine) = row.ok_or_else(|| PlatformError::NotFound(format!("terminal session #{id}")))?;
    if closed_at.is_some() {
        return Ok(());
    }
    sqlx::query("UPDATE terminal_sessions SET close_requested_by = ? WHERE id = ? AND closed_at IS NULL")
        .bind(admin.id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    audit::record(
        &mut *tx,
        Some(admin.id),
        "terminal.close_request",
        &format!("asked to close terminal #{id} of {user} on machine {machine}"),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

const VIEW_SELECT: &str =
    "SELECT ts.id, ts.machine_id, m.name AS machine, u.username AS user, ts.client_addr, ts.server,
        ts.opened_at, ts.closed_at, ts.close_reason, ts.close_requested_by IS NOT NULL AS close_requested
    FROM terminal_sessions ts JOIN machines m ON m.id = ts.machine_id JOIN users u ON u.id = ts.user_id";

/// Open sessions, oldest first.
pub async fn list_open(pool: &Pool) -> Result<Vec<SessionView>, PlatformError> {
    Ok(sqlx::query_as(&format!("{VIEW_SELECT} WHERE ts.closed_at IS NULL ORDER BY ts.id")).fetch_all(pool).await?)
}

/// The most recently closed sessions, newest first.
pub async fn list_closed(pool: &Pool, limit: i64) -> Result<Vec<SessionView>, PlatformError> {
    Ok(sqlx::query_as(&format!(
        "{VIEW_SELECT} WHERE ts.closed_at IS NOT NULL ORDER BY ts.closed_at DESC, ts.id DESC LIMIT ?"
    ))
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// "3 s", "4 min 2 s", "2 h 5 min".
pub fn duration_text(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// The sessions this process holds, each with a channel its WebSocket task
/// watches for a close.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<RegistryInner>,
}

struct RegistryInner {
    pool: Pool,
    /// This process's id in `terminal_sessions.server`.
    server: String,
    sessions: Mutex<HashMap<i64, watch::Sender<Option<CloseReason>>>>,
}

/// Held by a session's task: the close signal, and deregistration on drop.
pub struct Registration {
    registry: Registry,
    pub id: i64,
    pub closed: watch::Receiver<Option<CloseReason>>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.inner.sessions.lock().expect("terminal registry").remove(&self.id);
    }
}

impl Registry {
    /// A registry with its watcher running on the current Tokio runtime.
    pub fn start(pool: Pool) -> Registry {
        let server = format!("{}-{:08x}", std::process::id(), rand::random::<u32>());
        let registry =
            Registry { inner: Arc::new(RegistryInner { pool, server, sessions: Mutex::new(HashMap::new()) }) };
        tokio::spawn(watch_loop(Arc::downgrade(&registry.inner)));
        registry
    }

    pub fn server_id(&self) -> &str {
        &self.inner.server
    }

    pub fn open_count(&self) -> usize {
        self.inner.sessions.lock().expect("terminal registry").len()
    }

    pub fn register(&self, id: i64) -> Registration {
        let (tx, rx) = watch::channel(None);
        self.inner.sessions.lock().expect("terminal registry").insert(id, tx);
        Registration { registry: self.clone(), id, closed: rx }
    }

    /// Signals one session of this process (no-op if it is not here).
    pub fn signal(&self, id: i64, reason: CloseReason) {
        if let Some(tx) = self.inner.sessions.lock().expect("terminal registry").get(&id) {
            tx.send_if_modified(|cur| {
                if cur.is_none() {
                    *cur = Some(reason);
                    true
                } else {
                    false
                }
            });
        }
    }

    /// One watcher pass (see the module docs).
    pub async fn watch_once(&self, renew: bool) -> Result<(), PlatformError> {
        let ids: Vec<i64> = self.inner.sessions.lock().expect("terminal registry").keys().copied().collect();
        let pool = &self.inner.pool;
        if !ids.is_empty() {
            // The account's generation too: a terminal opened before it was
            // disabled, demoted or had its password reset (or was deleted)
            // closes like its browser sessions end.
            let rows: Vec<(i64, String, String, Option<String>, bool)> = sqlx::query_as(&format!(
                "SELECT ts.id, m.name, {}, a.username,
                        (u.id IS NULL OR u.disabled OR u.session_gen <> ts.user_gen)
                 FROM terminal_sessions ts JOIN machines m ON m.id = ts.machine_id
                 LEFT JOIN users a ON a.id = ts.close_requested_by LEFT JOIN users u ON u.id = ts.user_id
                 WHERE ts.server = ? AND ts.closed_at IS NULL",
                super::terminal_state_sql()
            ))
            .bind(&self.inner.server)
            .fetch_all(pool)
            .await?;
            for (id, machine, state, admin, account_changed) in rows {
                if let Some(admin) = admin {
                    self.signal(
                        id,
                        CloseReason::new(super::CloseCause::ClosedByAdmin, format!("closed by administrator {admin}")),
                    );
                } else if account_changed {
                    let why = "your account was changed (disabled, its role or its password): sign in again";
                    self.signal(id, CloseReason::new(super::CloseCause::AccountChanged, why));
                } else {
                    match state.parse::<super::TerminalState>() {
                        Ok(super::TerminalState::RUNNING) => {}
                        Ok(state) => self.signal(id, CloseReason::for_state(&machine, state)),
                        Err(e) => tracing::warn!(session = id, error = %e, "terminal's machine has an unknown state"),
                    }
                }
            }
        }
        if renew {
            let at = now();
            if !ids.is_empty() {
                sqlx::query("UPDATE terminal_sessions SET seen_at = ? WHERE server = ? AND closed_at IS NULL")
                    .bind(at)
                    .bind(&self.inner.server)
                    .execute(pool)
                    .await?;
            }
            // A row this process wrote whose request ended before its
            // terminal was registered (the client hung up in between) has
            // no terminal to close it: renewed with the rest, it would stay
            // open — and an admin's close would reach nobody — until this
            // process stops. (A session ending normally closes its row
            // before it leaves the registry.)
            let ours: Vec<i64> = sqlx::query_scalar(
                "SELECT id FROM terminal_sessions WHERE server = ? AND closed_at IS NULL AND opened_at < ?",
            )
            .bind(&self.inner.server)
            .bind(at - STALE_AFTER_SECS)
            .fetch_all(pool)
            .await?;
            for id in ours {
                if !self.inner.sessions.lock().expect("terminal registry").contains_key(&id) {
                    close(pool, id, "its request ended before the terminal started").await?;
                }
            }
            let stale: Vec<i64> = sqlx::query_scalar(
                "SELECT id FROM terminal_sessions WHERE closed_at IS NULL AND seen_at < ? AND server <> ?",
            )
            .bind(at - STALE_AFTER_SECS)
            .bind(&self.inner.server)
            .fetch_all(pool)
            .await?;
            for id in stale {
                close(pool, id, "its server process stopped").await?;
            }
        }
        Ok(())
    }
}

async fn watch_loop(inner: std::sync::Weak<RegistryInner>) {
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u32 = 0;
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let registry = Registry { inner };
        if let Err(e) = registry.watch_once(n.is_multiple_of(RENEW_EVERY_TICKS)).await {
            tracing::warn!(error = %e, "terminal session watcher");
        }
        n = n.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations() {
        assert_eq!(super::duration_text(5), "5 s");
        assert_eq!(super::duration_text(242), "4 min 2 s");
        assert_eq!(super::duration_text(7500), "2 h 5 min");
    }
}
