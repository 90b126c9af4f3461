//! A username and password typed on the sign-in page, with a directory
//! configured or not. The order, documented in the README:
//! 1. a local account of that name, not made by a directory sign-in, while
//!    local passwords are on (or it is the break-glass admin): its local
//!    password, as before;
//! 2. otherwise, with LDAP configured: the directory, then the mappings
//!    ([`super::sign_in_external`]);
//! 3. otherwise: refused as a wrong password.
//!
//! Every way counts the attempt in the sign-in throttle first, and a wrong
//! name or password gets the same answer whichever way it went, so the
//! answer never tells whether an account exists.

use super::ldap::{LdapConfig, LdapFailure};
use crate::{accounts, accounts::User, db::Pool, password, throttle, PlatformError};
use gantry_core::validate;

pub async fn password_sign_in(
    pool: &Pool,
    gate: &password::Gate,
    ldap: Option<&LdapConfig>,
    username: &str,
    password: &str,
    address: Option<&str>,
) -> Result<User, PlatformError> {
    let username = username.trim();
    validate::login_name(username)?;
    validate::present_password(password)?;
    let local: Option<(bool,)> = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM external_identities e WHERE e.user_id = u.id) FROM users u WHERE u.username = ?",
    )
    .bind(username)
    .fetch_optional(pool)
    .await?;
    let settings = super::settings::settings(pool).await?;
    let local_ok = matches!(local, Some((false,))) && settings.local_password_allowed(username);
    if local_ok {
        return accounts::authenticate_with(pool, gate, username, password, address).await;
    }
    let counted = throttle::count_attempt(pool, &throttle::keys(username, address)).await?;
    let Some(ldap) = ldap else {
        // The same argon2 work as a wrong local password.
        let _ = accounts::verify_counted(pool, gate, &counted, &password::DUMMY_HASH, password).await?;
        return Err(PlatformError::BadCredentials);
    };
    match ldap.authenticate(username, password).await {
        Ok(identity) => {
            throttle::forgive(pool, &counted).await?;
            super::sign_in_external(pool, &identity).await
        }
        Err(LdapFailure::BadCredentials) => Err(PlatformError::BadCredentials),
        Err(other) => {
            // Not the user's guess: the directory's trouble.
            throttle::give_back(pool, &counted).await?;
            tracing::warn!(error = %other, "LDAP sign-in failed");
            Err(other.into())
        }
    }
}
