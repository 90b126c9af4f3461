//! SSH public keys (issue #34): each names one Gantry account to the SSH
//! gateway, which takes keys only (never passwords). A person adds and
//! removes their own keys (account page, `/api/v1/ssh-keys`); every change
//! is audited. A key belongs to one account: its SHA-256 fingerprint is
//! unique, so the same key on a second account is refused (without saying
//! whose it is), as is a duplicate on the same account. Every refusal says
//! why and changes nothing.

pub mod parse;

use crate::{
    accounts::{self, User},
    audit,
    db::Pool,
    now, PlatformError,
};
use serde::{Deserialize, Serialize};

pub use parse::{ParsedKey, MAX_INPUT, MIN_RSA_BITS};

/// Keys one account may hold: enough for every laptop and CI runner.
pub const MAX_KEYS_PER_USER: i64 = 50;

/// A stored key as its owner sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct SshKeyView {
    pub id: i64,
    pub name: String,
    /// "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa".
    pub algorithm: String,
    pub bits: i64,
    /// "SHA256:…", as `ssh-keygen -lf` prints it.
    pub fingerprint: String,
    pub created_at: i64,
    /// When the gateway last let it in.
    pub last_used_at: Option<i64>,
}

const VIEW_COLUMNS: &str = "id, name, algorithm, bits, fingerprint, created_at, last_used_at";

/// The signed-in user's keys, oldest first.
pub async fn list(pool: &Pool, who: &User) -> Result<Vec<SshKeyView>, PlatformError> {
    Ok(sqlx::query_as(&format!("SELECT {VIEW_COLUMNS} FROM ssh_keys WHERE user_id = ? ORDER BY id"))
        .bind(who.id)
        .fetch_all(pool)
        .await?)
}

/// Adds a key (`text`: one OpenSSH public-key line) to `who`'s account
/// under `name` (empty: the key's comment). Refused, with the reason and
/// nothing stored: a bad or unaccepted key (see [`parse::parse`]), one
/// already on this account or on another, or an account at
/// [`MAX_KEYS_PER_USER`].
pub async fn add(pool: &Pool, who: &User, name: &str, text: &str) -> Result<SshKeyView, PlatformError> {
    let parsed = parse::parse(text).map_err(PlatformError::BadRequest)?;
    let name = parse::key_name(name, &parsed).map_err(PlatformError::BadRequest)?;
    let mut tx = pool.begin().await?;
    let holder: Option<i64> = sqlx::query_scalar("SELECT user_id FROM ssh_keys WHERE fingerprint = ?")
        .bind(&parsed.fingerprint)
        .fetch_optional(&mut *tx)
        .await?;
    match holder {
        Some(id) if id == who.id => {
            return Err(PlatformError::Conflict(format!("this key ({}) is already on your account", parsed.fingerprint)))
        }
        Some(_) => {
            return Err(PlatformError::Conflict(format!(
                "this key ({}) belongs to another account; a key can identify one account only — make a new key for this one",
                parsed.fingerprint
            )))
        }
        None => {}
    }
    let count: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM ssh_keys WHERE user_id = ?").bind(who.id).fetch_one(&mut *tx).await?;
    if count >= MAX_KEYS_PER_USER {
        return Err(PlatformError::Refused(format!(
            "you have {count} SSH keys, the limit; remove one you no longer use first"
        )));
    }
    let view: SshKeyView = sqlx::query_as(&format!(
        "INSERT INTO ssh_keys (user_id, name, algorithm, bits, fingerprint, public_key, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {VIEW_COLUMNS}"
    ))
    .bind(who.id)
    .bind(&name)
    .bind(&parsed.algorithm)
    .bind(parsed.bits)
    .bind(&parsed.fingerprint)
    .bind(&parsed.openssh)
    .bind(now())
    .fetch_one(&mut *tx)
    .await?;
    audit::record(
        &mut *tx,
        Some(who.id),
        "ssh_key.add",
        &format!("added SSH key \"{name}\" ({} {} bits, {})", parsed.algorithm, parsed.bits, parsed.fingerprint),
    )
    .await?;
    tx.commit().await?;
    Ok(view)
}

/// Removes one of `who`'s keys; another account's key (or none) is "not
/// found". Sessions already open with it stay open until they end.
pub async fn remove(pool: &Pool, who: &User, id: i64) -> Result<(), PlatformError> {
    let mut tx = pool.begin().await?;
    let row: Option<(String, String)> =
        sqlx::query_as("DELETE FROM ssh_keys WHERE id = ? AND user_id = ? RETURNING name, fingerprint")
            .bind(id)
            .bind(who.id)
            .fetch_optional(&mut *tx)
            .await?;
    let (name, fingerprint) = row.ok_or_else(|| PlatformError::NotFound(format!("SSH key #{id}")))?;
    audit::record(&mut *tx, Some(who.id), "ssh_key.remove", &format!("removed SSH key \"{name}\" ({fingerprint})"))
        .await?;
    tx.commit().await?;
    Ok(())
}

/// For the gateway: the account holding the key with this fingerprint
/// ("SHA256:…") and the key's id, or `None`. A disabled account is
/// returned as it is (the caller refuses it and says so in its log).
pub async fn holder(pool: &Pool, fingerprint: &str) -> Result<Option<(i64, User)>, PlatformError> {
    let row: Option<(i64, i64)> = sqlx::query_as("SELECT id, user_id FROM ssh_keys WHERE fingerprint = ?")
        .bind(fingerprint)
        .fetch_optional(pool)
        .await?;
    let Some((key_id, user_id)) = row else { return Ok(None) };
    Ok(accounts::user_by_id(pool, user_id).await?.map(|u| (key_id, u)))
}

/// Records that the gateway let a key in now.
pub async fn note_used(pool: &Pool, key_id: i64) -> Result<(), PlatformError> {
    sqlx::query("UPDATE ssh_keys SET last_used_at = ? WHERE id = ?").bind(now()).bind(key_id).execute(pool).await?;
    Ok(())
}
