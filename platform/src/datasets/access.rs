//! Who a transfer runs for, and whether they still may. A transfer is
//! allowed when it begins, but it must not outlive the right to it: the
//! account disabled or deleted, its sessions ended (a password reset or
//! change, a demotion: `session_gen` moves on), the account moved to
//! another group or demoted (the right was the group's, or an admin's:
//! checked for tokens too, whose owner's sessions say nothing), the browser session it came
//! with ended (signed out, or idle for too long: the server reads its row
//! through a [`SessionProbe`]), or the API token it came with revoked. An upload looks again at each renewal of its writer lease
//! ([`super::writing`]); a download as its bytes go out.

use crate::{accounts::User, db::Pool, tokens, PlatformError};
use gantry_core::Role;
use std::{future::Future, pin::Pin, sync::Arc};

/// Whether the browser session a request came with still lasts, as the
/// server reads it (this crate does not know the session store): one read
/// each time the right is looked at.
#[derive(Clone)]
pub struct SessionProbe(Arc<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>);

impl SessionProbe {
    pub fn new<F>(lasts: impl Fn() -> F + Send + Sync + 'static) -> Self
    where
        F: Future<Output = bool> + Send + 'static,
    {
        SessionProbe(Arc::new(move || Box::pin(lasts())))
    }

    async fn lasts(&self) -> bool {
        (self.0)().await
    }
}

/// The right a request came in with.
#[derive(Clone)]
pub enum Access {
    /// A signed-in session, made in this generation of the account's
    /// sessions; with a probe, also only while that very session lasts.
    Session { user_id: i64, session_gen: i64, probe: Option<SessionProbe>, granted: Granted },
    /// A personal API token, by its hash as stored (never the secret).
    Token { user_id: i64, secret_hash: String, granted: Granted },
}

/// What the right rests on: membership of a group (`group_id`), being an
/// admin, or both; neither for a public dataset's download. Leaving the
/// group, or no longer being an admin, ends a right that rests on it.
#[derive(Clone, Copy, Debug)]
pub struct Granted {
    group_id: Option<i64>,
    admin: bool,
}

impl Granted {
    /// As the account was when the transfer began: its group, and admin if
    /// it was one (see [`Access::reading`] for a download's own rule).
    fn of(user: &User) -> Self {
        Granted { group_id: Some(user.group_id), admin: user.role.is_admin() }
    }
}

impl Access {
    /// A browser session's right: `user` as the session guard let it in.
    pub fn session(user: &User) -> Self {
        Access::Session { user_id: user.id, session_gen: user.session_gen, probe: None, granted: Granted::of(user) }
    }

    /// [`Access::session`] that also ends when `probe` says the request's
    /// own session has (signed out in any tab, or idle too long).
    pub fn browser_session(user: &User, probe: SessionProbe) -> Self {
        Access::Session {
            user_id: user.id,
            session_gen: user.session_gen,
            probe: Some(probe),
            granted: Granted::of(user),
        }
    }

    /// A bearer token's right: `user` is the account it authenticated as.
    pub fn token(user: &User, secret: &str) -> Self {
        Access::Token { user_id: user.id, secret_hash: tokens::hash(secret), granted: Granted::of(user) }
    }

    /// The right to read a dataset of group `dataset_group` (public or not)
    /// for `user`: a public one rests on nothing but the account, a member's
    /// on the membership, anyone else's on being an admin.
    pub fn reading(mut self, user: &User, dataset_group: i64, public: bool) -> Self {
        let rule = if public {
            Granted { group_id: None, admin: false }
        } else if user.group_id == dataset_group {
            Granted { group_id: Some(dataset_group), admin: false }
        } else {
            Granted { group_id: None, admin: true }
        };
        match &mut self {
            Access::Session { granted, .. } | Access::Token { granted, .. } => *granted = rule,
        }
        self
    }

    /// The right of the account's sessions as they are now, for a caller
    /// that did not say what let its request in.
    pub async fn sessions_now(pool: &Pool, user_id: i64) -> Result<Self, PlatformError> {
        let now: Option<(i64, i64, String)> =
            sqlx::query_as("SELECT session_gen, group_id, role FROM users WHERE id = ?")
                .bind(user_id)
                .fetch_optional(pool)
                .await?;
        // An account that is gone holds no right, whatever the figures.
        let (session_gen, group_id, role) = now.unwrap_or_default();
        Ok(Access::Session {
            user_id,
            session_gen,
            probe: None,
            granted: Granted { group_id: Some(group_id), admin: role.parse::<Role>().is_ok_and(Role::is_admin) },
        })
    }

    /// Whether the right still holds. An error is no verdict: the caller
    /// looks again later.
    pub async fn holds(&self, pool: &Pool) -> Result<bool, PlatformError> {
        let live: i64 = match self {
            Access::Session { user_id, session_gen, probe, granted } => {
                let live: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM users WHERE id = ? AND NOT disabled AND session_gen = ?
                        AND (?3 IS NULL OR group_id = ?3) AND (role = 'admin' OR NOT ?4)",
                )
                .bind(user_id)
                .bind(session_gen)
                .bind(granted.group_id)
                .bind(granted.admin)
                .fetch_one(pool)
                .await?;
                match probe {
                    Some(probe) if live > 0 && !probe.lasts().await => 0,
                    _ => live,
                }
            }
            // What `tokens::authenticate` lets in, without noting a use.
            Access::Token { user_id, secret_hash, granted } => {
                sqlx::query_scalar(
                    "SELECT COUNT(*) FROM api_tokens t JOIN users u ON u.id = t.user_id
                      WHERE t.secret_hash = ? AND t.user_id = ? AND t.revoked_at IS NULL AND NOT u.disabled AND NOT u.must_change_password
                        AND (?3 IS NULL OR u.group_id = ?3) AND (u.role = 'admin' OR NOT ?4) AND t.expires_at > ?5",
                )
                .bind(secret_hash)
                .bind(user_id)
                .bind(granted.group_id)
                .bind(granted.admin)
                .bind(crate::now())
                .fetch_one(pool)
                .await?
            }
        };
        Ok(live > 0)
    }
}
