//! Ends what a browser session let into a machine — an open terminal, a
//! followed log, a file on its way in or out — once that session ends:
//! signed out (in this tab or another: sign-out deletes the session's row),
//! unused for longer than the idle limit (the page guard's rule and clock),
//! or its account changed (disabled, demoted, its password reset, deleted:
//! a new session generation). The request was let in by the session; what
//! it started must not outlive it. Dataset transfers read their session's
//! row themselves, each time they look at their right
//! ([`SessionWatch::session_lasts`]).
//!
//! One watcher per server process, as for terminals' machines: every
//! [`WATCH_EVERY`] it reads each watched session once (tower-sessions'
//! row, by its primary key) and each watched account once, writes nothing,
//! and tells everything each one let in — all in the same pass.

use crate::security::{Clock, Security};
use app::api::auth::SESSION_SEEN_KEY;
use axum::{
    http::{request::Parts, StatusCode},
    response::Response,
};
use futures_util::StreamExt;
use gantry_platform::{
    accounts::{self, User},
    db::Pool,
    executor::{inside::ByteStream, ExecError},
    workspace::{sessions::WATCH_EVERY, CloseCause, CloseReason},
};
use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, Weak,
    },
};
use tokio::sync::watch;
use tower_sessions::{session::Id, Session, SessionStore};
use tower_sessions_sqlx_store::SqliteStore;

/// Why what a session let in ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Its row is gone: signed out, here or in another tab.
    SignedOut,
    /// Unused for longer than the idle limit.
    Expired,
    /// The account was disabled, demoted, had its password reset or was deleted.
    AccountChanged,
}

impl Ended {
    /// What happened, in words the user reads.
    pub fn what(self) -> &'static str {
        match self {
            Ended::SignedOut => "you signed out (this browser's session ended)",
            Ended::Expired => "your session ended (unused for longer than the sign-in limit)",
            Ended::AccountChanged => "your account was changed (disabled, its role or its password)",
        }
    }

    /// A terminal's close frame.
    pub fn close_reason(self) -> CloseReason {
        let code = if self == Ended::AccountChanged { CloseCause::AccountChanged } else { CloseCause::SessionEnded };
        CloseReason::new(code, format!("{}: sign in again", self.what()))
    }

    /// The answer to an upload it cut short.
    pub fn refusal(self) -> Response {
        let text =
            format!("the transfer stopped: {}; sign in again (part of the file may have been written)", self.what());
        super::refuse(StatusCode::UNAUTHORIZED, text)
    }
}

/// The process's watcher (cheap to clone).
#[derive(Clone)]
pub struct SessionWatch {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    store: SqliteStore,
    clock: Clock,
    idle_secs: i64,
    next_key: AtomicU64,
    watched: Mutex<HashMap<u64, Entry>>,
}

/// The account as the request was let in, and the session it came with.
struct Entry {
    user_id: i64,
    session_gen: i64,
    session: Option<Id>,
    tell: watch::Sender<Option<Ended>>,
}

/// One thing a session let in, watched while any clone of it lives.
#[derive(Clone)]
pub struct Watched {
    _key: Arc<Key>,
    told: watch::Receiver<Option<Ended>>,
}

struct Key {
    key: u64,
    inner: Weak<Inner>,
}

impl Drop for Key {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.lock().remove(&self.key);
        }
    }
}

impl Inner {
    /// Never poisoned for good: each change to the map is one step.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SessionWatch {
    /// A watcher with its loop running on the current Tokio runtime, using
    /// the page guard's idle limit and clock.
    pub fn start(pool: Pool, security: &Security) -> SessionWatch {
        let inner = Inner {
            store: SqliteStore::new(pool.clone()),
            pool,
            clock: security.clock.clone(),
            idle_secs: security.session_idle_secs,
            next_key: AtomicU64::new(0),
            watched: Mutex::new(HashMap::new()),
        };
        let watch = SessionWatch { inner: Arc::new(inner) };
        tokio::spawn(watch_loop(Arc::downgrade(&watch.inner)));
        watch
    }

    /// Watches what `user` was let in for with `session`.
    pub fn watch(&self, user: &User, session: Option<Id>) -> Watched {
        let (tell, told) = watch::channel(None);
        let key = self.inner.next_key.fetch_add(1, Ordering::Relaxed);
        self.inner.lock().insert(key, Entry { user_id: user.id, session_gen: user.session_gen, session, tell });
        Watched { _key: Arc::new(Key { key, inner: Arc::downgrade(&self.inner) }), told }
    }

    /// Watches what this request's session let `user` in for.
    pub fn watch_request(&self, parts: &Parts, user: &User) -> Watched {
        self.watch(user, parts.extensions.get::<Session>().and_then(Session::id))
    }

    /// One pass: reads each watched account and session once, then tells
    /// everything that ended. A database error is no verdict.
    pub async fn check_once(&self) {
        // The time is read before any row: a row read later can only be
        // newer. Read after, a session renewed between its row's read and
        // the clock's would be judged on its old stamp and a later time.
        let now = self.inner.clock.now();
        let (users, sessions): (Vec<i64>, Vec<Id>) = {
            let watched = self.inner.lock();
            let mut users: Vec<i64> = watched.values().map(|e| e.user_id).collect();
            let mut sessions: Vec<Id> = watched.values().filter_map(|e| e.session).collect();
            users.sort_unstable();
            users.dedup();
            sessions.sort_unstable_by_key(|id| id.0);
            sessions.dedup();
            (users, sessions)
        };
        let mut accounts = HashMap::new();
        for id in users {
            match accounts::user_by_id(&self.inner.pool, id).await {
                Ok(user) => {
                    accounts.insert(id, user.filter(|u| !u.disabled).map(|u| u.session_gen));
                }
                Err(e) => tracing::debug!(error = %e, user = id, "could not re-check an account"),
            }
        }
        let mut ended_sessions = HashMap::new();
        for id in sessions {
            if let Some(ended) = self.session_ended(&id, now).await {
                ended_sessions.insert(id, ended);
            }
        }
        for entry in self.inner.lock().values() {
            // The account first: a password change also replaces the session.
            let account_changed = accounts.get(&entry.user_id).is_some_and(|gen| *gen != Some(entry.session_gen));
            let ended = if account_changed {
                Some(Ended::AccountChanged)
            } else {
                entry.session.and_then(|s| ended_sessions.get(&s).copied())
            };
            if let Some(ended) = ended {
                // The first reason stays.
                entry.tell.send_if_modified(|told| {
                    let first = told.is_none();
                    if first {
                        *told = Some(ended);
                    }
                    first
                });
            }
        }
    }

    /// Whether session `id` still lasts, read now: false once signed out or
    /// idle too long; true too when its row could not be read (no verdict).
    pub async fn session_lasts(&self, id: &Id) -> bool {
        let now = self.inner.clock.now();
        self.session_ended(id, now).await.is_none()
    }

    /// Whether a session has ended by `now` (read before the row); `None`
    /// while it lasts (or when its row could not be read). One read of its
    /// row by primary key.
    async fn session_ended(&self, id: &Id, now: i64) -> Option<Ended> {
        match self.inner.store.load(id).await {
            // Deleted (signed out, or emptied by the page guard), or past
            // the store's own expiry.
            Ok(None) => Some(Ended::SignedOut),
            // Signed out, then saved again by a request still running.
            Ok(Some(_)) if accounts::signed_out(&self.inner.pool, &id.to_string()).await.unwrap_or(false) => {
                Some(Ended::SignedOut)
            }
            Ok(Some(record)) => {
                // The page guard's rule (`http_guard::session_user`): idle
                // when last used longer ago than the limit, by its clock.
                let seen = record.data.get(SESSION_SEEN_KEY).and_then(serde_json::Value::as_i64);
                seen.is_some_and(|seen| now - seen > self.inner.idle_secs).then_some(Ended::Expired)
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not re-check a session");
                None
            }
        }
    }
}

impl Watched {
    /// Why it ended, if it has.
    pub fn ended(&self) -> Option<Ended> {
        *self.told.borrow()
    }

    /// Resolves once it ends (never, should the watcher stop first).
    pub fn wait(&self) -> impl std::future::Future<Output = Ended> + Send + 'static {
        let mut told = self.told.clone();
        async move {
            match told.wait_for(Option::is_some).await.ok().and_then(|ended| *ended) {
                Some(ended) => ended,
                None => std::future::pending().await,
            }
        }
    }

    /// `body`, ended by an error once the session ends (the stream holds
    /// the watch).
    pub fn cut(self, body: ByteStream) -> ByteStream {
        futures_util::stream::unfold(Some((body, self)), |state| async move {
            let (mut body, watched) = state?;
            tokio::select! {
                biased;
                ended = watched.wait() => {
                    Some((Err(ExecError::Failed(format!("the transfer stopped: {}", ended.what()))), None))
                }
                item = body.next() => item.map(|item| (item, Some((body, watched)))),
            }
        })
        .boxed()
    }
}

async fn watch_loop(inner: Weak<Inner>) {
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        SessionWatch { inner }.check_once().await;
    }
}
