//! Personal API tokens for scripts (PRODUCT D2): shown once when made,
//! kept only as a SHA-256 hash, scoped to their owner, revocable. A token
//! is 32 random bytes, so a fast hash is enough: there is nothing to guess.

use crate::{
    accounts::{self, User},
    audit,
    db::Pool,
    now, PlatformError,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const PREFIX: &str = "gnt_";

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct TokenView {
    pub id: i64,
    pub name: String,
    /// The secret's first characters ("gnt_1a2b3c"), to tell tokens apart.
    pub prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

pub(crate) fn hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Makes a token for `owner` (the account as the request's session found
/// it); the returned secret is never stored or shown again.
pub async fn create(pool: &Pool, owner: &User, name: &str) -> Result<(TokenView, String), PlatformError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(PlatformError::BadRequest("token name must be 1 to 64 printable characters".into()));
    }
    let bytes: [u8; 32] = rand::random();
    let secret = format!("{PREFIX}{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let prefix = secret[..PREFIX.len() + 6].to_string();
    let mut tx = crate::transitions::begin(pool).await?;
    // Only for the account as the request's session found it: a reset,
    // disable or role change committed meanwhile (they move `session_gen`)
    // revoked the tokens there were, and one made now must not outlive it.
    let view: Option<TokenView> = sqlx::query_as(
        "INSERT INTO api_tokens (user_id, name, secret_hash, prefix, created_at)
         SELECT id, ?, ?, ?, ? FROM users WHERE id = ? AND session_gen = ? AND NOT disabled AND NOT must_change_password
         RETURNING id, name, prefix, created_at, last_used_at, revoked_at",
    )
    .bind(name)
    .bind(hash(&secret))
    .bind(&prefix)
    .bind(now())
    .bind(owner.id)
    .bind(owner.session_gen)
    .fetch_optional(&mut *tx)
    .await?;
    let view = view.ok_or_else(|| {
        PlatformError::Conflict("your account was changed while the token was being made (a reset, or an administrator's change); no token was made".into())
    })?;
    audit::record(&mut *tx, Some(owner.id), "token.create", &format!("API token {name} ({prefix}…)")).await?;
    tx.commit().await?;
    Ok((view, secret))
}

pub async fn list(pool: &Pool, owner: &User) -> Result<Vec<TokenView>, PlatformError> {
    Ok(sqlx::query_as("SELECT id, name, prefix, created_at, last_used_at, revoked_at FROM api_tokens WHERE user_id = ? ORDER BY id DESC")
        .bind(owner.id)
        .fetch_all(pool)
        .await?)
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

/// The account a bearer token belongs to; `None` for anything that is not
/// a live token, and for an account that may not act now: disabled, or
/// waiting for its owner to replace an admin-set temporary password (what
/// a browser session of it could not do, a script cannot either).
pub async fn authenticate(pool: &Pool, secret: &str) -> Result<Option<User>, PlatformError> {
    if !secret.starts_with(PREFIX) || secret.len() != PREFIX.len() + 64 {
        return Ok(None);
    }
    let user_id: Option<i64> =
        sqlx::query_scalar("SELECT user_id FROM api_tokens WHERE secret_hash = ? AND revoked_at IS NULL")
            .bind(hash(secret))
            .fetch_optional(pool)
            .await?;
    let Some(user_id) = user_id else { return Ok(None) };
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
    Ok(accounts::user_by_id(pool, user_id).await?.filter(|u| !u.disabled && !u.must_change_password))
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
