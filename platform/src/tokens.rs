//! Personal API tokens for scripts (PRODUCT D2): shown once when made,
//! kept only as a SHA-256 hash, scoped to their owner, revocable. A token
//! is 32 random bytes, so a fast hash is enough: there is nothing to guess.
//!
//! A token is asked for with its owner's password (checked and throttled
//! as a sign-in is, [`create_confirmed`]): a stolen session cookie alone
//! does not become a token. It expires ([`TokenLifetime`], 90 days unless
//! the server says otherwise), and every change that ends the account's
//! sessions — a password change or reset, disabling the account, a role
//! change — and a group change revoke all of its tokens in the same commit
//! ([`revoke_all`], called from `accounts::lifecycle`). Enabling an account
//! again revives nothing.
//!
//! Each token has a scope ([`TokenScope`], chosen when it is made): `read`,
//! `write` (what tokens did before scopes: migration 0040) or `admin`, the
//! last only for an admin ([`create_confirmed_scoped`] refuses it to anyone
//! else, in the insert itself). [`authenticate_scoped`] hands the scope to
//! the API, which checks it on every request (`TokenScope::allows`).

use crate::{
    accounts::{self, User},
    audit,
    db::Pool,
    now, password,
    transitions::Tx,
    PlatformError,
};
pub use gantry_core::token_scope::{ScopeRefusal, TokenScope};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const PREFIX: &str = "gnt_";

/// How long a new token lives, in seconds: `--token-lifetime-days` of the
/// server (90 days by default), handed to the create through the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenLifetime(pub i64);

impl TokenLifetime {
    pub const DEFAULT_DAYS: i64 = 90;

    pub fn days(days: i64) -> TokenLifetime {
        TokenLifetime(days.saturating_mul(86_400))
    }
}

impl Default for TokenLifetime {
    fn default() -> Self {
        TokenLifetime::days(Self::DEFAULT_DAYS)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct TokenView {
    pub id: i64,
    pub name: String,
    /// The secret's first characters ("gnt_1a2b3c"), to tell tokens apart.
    pub prefix: String,
    pub created_at: i64,
    /// From then on the token authenticates as nothing. `None` only for a
    /// row no migration or create wrote one for: such a token never works.
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// `read`, `write` or `admin` ([`TokenScope`]).
    pub scope: String,
    /// Whether it had expired when it was read (`list`): the page shows
    /// the state the server judged, whatever the browser's clock says.
    #[sqlx(skip)]
    #[serde(default)]
    pub expired: bool,
}

const VIEW_COLUMNS: &str = "id, name, prefix, created_at, expires_at, last_used_at, revoked_at, scope";

pub(crate) fn hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// What a person asks for on the Tokens page: a token for `owner` (the
/// account as the request's session found it), made only when `password`
/// is the account's own — checked as a sign-in is, counted by the same
/// throttle (account and client `address`) and waiting for the same
/// argon2 gate. A wrong password makes nothing and says so.
pub async fn create_confirmed(
    pool: &Pool,
    gate: &password::Gate,
    owner: &User,
    password: &str,
    name: &str,
    address: Option<&str>,
    lifetime: TokenLifetime,
) -> Result<(TokenView, String), PlatformError> {
    create_confirmed_scoped(pool, gate, owner, password, name, address, lifetime, TokenScope::Write).await
}

/// [`create_confirmed`] with the scope asked for; `admin` is refused
/// (nothing made, the password not even checked) unless `owner` is an admin.
// The create's inputs, each as the form names it.
#[allow(clippy::too_many_arguments)]
pub async fn create_confirmed_scoped(
    pool: &Pool,
    gate: &password::Gate,
    owner: &User,
    password: &str,
    name: &str,
    address: Option<&str>,
    lifetime: TokenLifetime,
    scope: TokenScope,
) -> Result<(TokenView, String), PlatformError> {
    let name = checked_name(name)?;
    checked_scope(owner, scope)?;
    if !accounts::confirm_password(pool, gate, owner, password, address).await? {
        return Err(PlatformError::BadRequest("your password is wrong; no token was made".into()));
    }
    create_for(pool, owner, name, lifetime, scope).await
}

fn checked_scope(owner: &User, scope: TokenScope) -> Result<(), PlatformError> {
    if !scope.may_be_made_by(owner.role.is_admin()) {
        return Err(PlatformError::BadRequest("only administrators may make admin tokens; no token was made".into()));
    }
    Ok(())
}

/// Makes a token for `owner` with the default lifetime, without asking for
/// the password: for what already acts as the account in this process
/// (tests, the benchmark), never for a request. The pages use
/// [`create_confirmed`].
pub async fn create(pool: &Pool, owner: &User, name: &str) -> Result<(TokenView, String), PlatformError> {
    create_scoped(pool, owner, name, TokenScope::Write).await
}

/// [`create`] with a scope (tests): `admin` only for an admin.
pub async fn create_scoped(
    pool: &Pool,
    owner: &User,
    name: &str,
    scope: TokenScope,
) -> Result<(TokenView, String), PlatformError> {
    let name = checked_name(name)?;
    checked_scope(owner, scope)?;
    create_for(pool, owner, name, TokenLifetime::default(), scope).await
}

fn checked_name(name: &str) -> Result<&str, PlatformError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(PlatformError::BadRequest("token name must be 1 to 64 printable characters".into()));
    }
    Ok(name)
}

/// The secret, its hash and the row, in one commit with its audit row.
async fn create_for(
    pool: &Pool,
    owner: &User,
    name: &str,
    lifetime: TokenLifetime,
    scope: TokenScope,
) -> Result<(TokenView, String), PlatformError> {
    let bytes: [u8; 32] = rand::random();
    let secret = format!("{PREFIX}{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let prefix = secret[..PREFIX.len() + 6].to_string();
    let mut tx = crate::transitions::begin(pool).await?;
    // Only for the account as the request's session found it, in the
    // account's group of then: a password change or reset, a disable or a
    // role change committed meanwhile (each moves `session_gen`) or a
    // group change revoked every token the account had (`revoke_all`, in
    // the change's own commit), and one made now must not outlive it. An
    // admin token only while the account is an admin.
    let created = now();
    let view: Option<TokenView> = sqlx::query_as(&format!(
        "INSERT INTO api_tokens (user_id, name, secret_hash, prefix, created_at, expires_at, scope)
         SELECT id, ?, ?, ?, ?, ?, ? FROM users
          WHERE id = ? AND session_gen = ? AND group_id = ? AND NOT disabled AND NOT must_change_password
            AND (? <> 'admin' OR role = 'admin')
         RETURNING {VIEW_COLUMNS}"
    ))
    .bind(name)
    .bind(hash(&secret))
    .bind(&prefix)
    .bind(created)
    .bind(created.saturating_add(lifetime.0.max(1)))
    .bind(scope.as_str())
    .bind(owner.id)
    .bind(owner.session_gen)
    .bind(owner.group_id)
    .bind(scope.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    let view = view.ok_or_else(|| {
        PlatformError::Conflict("your account was changed while the token was being made (a reset, or an administrator's change); no token was made".into())
    })?;
    audit::record(&mut *tx, Some(owner.id), "token.create", &format!("API token {name} ({prefix}…, scope {scope})"))
        .await?;
    tx.commit().await?;
    Ok((view, secret))
}

/// The owner's tokens, newest first, each marked expired or not as of now.
pub async fn list(pool: &Pool, owner: &User) -> Result<Vec<TokenView>, PlatformError> {
    let mut tokens: Vec<TokenView> =
        sqlx::query_as(&format!("SELECT {VIEW_COLUMNS} FROM api_tokens WHERE user_id = ? ORDER BY id DESC"))
            .bind(owner.id)
            .fetch_all(pool)
            .await?;
    let at = now();
    for t in &mut tokens {
        t.expired = t.expires_at.is_none_or(|e| e <= at);
    }
    Ok(tokens)
}

/// Revokes one of the owner's own tokens (another's is "not found").
pub async fn revoke(pool: &Pool, owner: &User, id: i64) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    let done = sqlx::query("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL")
        .bind(now())
        .bind(id)
        .bind(owner.id)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() != 1 {
        return Err(PlatformError::NotFound("token".into()));
    }
    audit::record(&mut *tx, Some(owner.id), "token.revoke", &format!("API token #{id} revoked")).await?;
    tx.commit().await?;
    Ok(())
}

/// Revokes every live token of `user_id` inside the caller's transaction
/// (an account change of `accounts::lifecycle`); the number revoked, for
/// the change's audit row.
pub(crate) async fn revoke_all(tx: &mut Tx, user_id: i64) -> Result<u64, PlatformError> {
    Ok(sqlx::query("UPDATE api_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL")
        .bind(now())
        .bind(user_id)
        .execute(&mut **tx)
        .await?
        .rows_affected())
}

/// The account a bearer token belongs to; `None` for anything that is not
/// a live token (revoked, expired, unknown), and for an account that may not act now: disabled, or
/// waiting for its owner to replace an admin-set temporary password (what
/// a browser session of it could not do, a script cannot either).
pub async fn authenticate(pool: &Pool, secret: &str) -> Result<Option<User>, PlatformError> {
    Ok(authenticate_scoped(pool, secret).await?.map(|(user, _)| user))
}

/// The token a request came with, as [`authenticate_scoped`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bearer {
    pub token_id: i64,
    pub scope: TokenScope,
}

/// [`authenticate`], with the token's id and scope. A scope the database
/// holds but this build does not know reads as `read` (the least).
pub async fn authenticate_scoped(pool: &Pool, secret: &str) -> Result<Option<(User, Bearer)>, PlatformError> {
    if !secret.starts_with(PREFIX) || secret.len() != PREFIX.len() + 64 {
        return Ok(None);
    }
    let row: Option<(i64, i64, String)> = sqlx::query_as(
        "SELECT id, user_id, scope FROM api_tokens WHERE secret_hash = ? AND revoked_at IS NULL AND expires_at > ?",
    )
    .bind(hash(secret))
    .bind(now())
    .fetch_optional(pool)
    .await?;
    let Some((token_id, user_id, scope)) = row else { return Ok(None) };
    let bearer = Bearer { token_id, scope: TokenScope::parse(&scope).unwrap_or(TokenScope::Read) };
    // Coarse "last used": one write a minute per token at most, and only a
    // note: a request is not refused because the database was too busy to
    // take it (a read-only call would have answered 500 under write load).
    let noted = sqlx::query(
        "UPDATE api_tokens SET last_used_at = ?1 WHERE secret_hash = ?2 AND COALESCE(last_used_at, 0) < ?1 - 60",
    )
    .bind(now())
    .bind(hash(secret))
    .execute(pool)
    .await;
    if let Err(e) = noted {
        tracing::warn!(user_id, error = %e, "could not note an API token's last use");
    }
    Ok(accounts::user_by_id(pool, user_id)
        .await?
        .filter(|u| !u.disabled && !u.must_change_password)
        .map(|u| (u, bearer)))
}

/// The credentials of an `Authorization: Bearer …` header value. The scheme
/// is case-insensitive (RFC 9110 §11.1), so `bearer` and `BEARER` are the
/// same; surrounding spaces are dropped.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, credentials) = header.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| credentials.trim()).filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::bearer;

    #[test]
    fn the_bearer_scheme_is_read_in_any_case_and_nothing_else_is() {
        assert_eq!(bearer("Bearer gnt_abc"), Some("gnt_abc"));
        assert_eq!(bearer("bearer gnt_abc "), Some("gnt_abc"));
        assert_eq!(bearer("BEARER   gnt_abc"), Some("gnt_abc"));
        assert_eq!(bearer("Basic dXNlcjpwdw=="), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer  "), None);
        assert_eq!(bearer("Bearergnt_abc"), None);
    }
}
