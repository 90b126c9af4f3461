//! [`sign_in_external`]: a directory account's Gantry account, made or
//! brought in line with the mappings at every sign-in.

use super::ExternalIdentity;
use crate::accounts::{self, User};
use crate::{audit, db::Pool, error::is_unique_violation, now, tokens, transitions::Tx, PlatformError};
use gantry_core::sso_mapping::{decide, Decision, Mapping};
use gantry_core::{validate, Role};

/// What a directory account in no mapped group is told.
pub const NO_GROUP_MESSAGE: &str = "your account is in no group that may use Gantry — ask your administrator";

/// The password hash of an account made by a directory sign-in: not a PHC
/// string, so no local password ever matches it (`password::verify` counts
/// a malformed hash as a mismatch).
pub const SSO_PASSWORD_HASH: &str = "!sso";

/// Signs a directory account in: finds its Gantry account by provider and
/// subject (never by name alone), or makes one just in time; moves it to
/// the group and role its directory groups map to now (a group move ends
/// its sessions and revokes its API tokens); refuses it with
/// [`NO_GROUP_MESSAGE`] when none of its groups is mapped, disabling the
/// account it had (sessions ended, tokens revoked). A local account of the
/// same name is never taken over: refused, saying so.
pub async fn sign_in_external(pool: &Pool, id: &ExternalIdentity) -> Result<User, PlatformError> {
    if !matches!(id.provider.as_str(), "ldap" | "oidc") {
        return Err(PlatformError::Internal(format!("unknown sign-in provider {:?}", id.provider)));
    }
    if id.subject.trim().is_empty() || id.subject.len() > 2048 {
        return Err(PlatformError::Refused("the directory gave no usable identifier for this account".into()));
    }
    let mappings: Vec<Mapping> = super::mapping::list_mappings(pool).await?.into_iter().map(Into::into).collect();
    let decision = decide(&mappings, &id.groups);
    let linked: Option<(i64, bool)> =
        sqlx::query_as("SELECT user_id, disabled_by_sso FROM external_identities WHERE provider = ? AND subject = ?")
            .bind(&id.provider)
            .bind(&id.subject)
            .fetch_optional(pool)
            .await?;
    let who = format!("{} account {} ({})", id.provider, audit::untrusted_name(&id.username), id.subject);
    let user = match (decision, linked) {
        (None, linked) => return Err(refuse_unmapped(pool, &who, linked.map(|l| l.0)).await),
        (Some(d), None) => create(pool, id, &who, &d).await?,
        (Some(d), Some((uid, by_sso))) => update(pool, uid, by_sso, &who, &d).await?,
    };
    sqlx::query("UPDATE external_identities SET last_sign_in = ? WHERE provider = ? AND subject = ?")
        .bind(now())
        .bind(&id.provider)
        .bind(&id.subject)
        .execute(pool)
        .await?;
    audit::record(pool, Some(user.id), "sso.sign_in", &format!("{who} signed in as {}", user.username)).await?;
    Ok(user)
}

/// The refusal of an account in no mapped group; its Gantry account, if it
/// has one, is disabled in the same commit as the audit row.
async fn refuse_unmapped(pool: &Pool, who: &str, user_id: Option<i64>) -> PlatformError {
    let done = async {
        let mut tx = crate::transitions::begin(pool).await?;
        let mut detail = format!("{who} is in no mapped group");
        if let Some(uid) = user_id {
            detail.push_str(&disable(&mut tx, uid).await?);
        }
        audit::record(&mut *tx, user_id, "sso.refused", &detail).await?;
        tx.commit().await?;
        Ok::<_, PlatformError>(())
    };
    match done.await {
        Ok(()) => PlatformError::Refused(NO_GROUP_MESSAGE.into()),
        Err(e) => e,
    }
}

/// Disables an account the directory no longer maps, as an admin's
/// disable does: sessions end (`session_gen`), API tokens are revoked,
/// pending compute tasks cancelled. Marked so that a later mapped sign-in
/// enables it again. Answers the audit's addition.
async fn disable(tx: &mut Tx, uid: i64) -> Result<String, PlatformError> {
    let changed =
        sqlx::query("UPDATE users SET disabled = 1, session_gen = session_gen + 1 WHERE id = ? AND NOT disabled")
            .bind(uid)
            .execute(&mut **tx)
            .await?
            .rows_affected();
    if changed == 0 {
        return Ok(String::new());
    }
    sqlx::query("UPDATE external_identities SET disabled_by_sso = 1 WHERE user_id = ?")
        .bind(uid)
        .execute(&mut **tx)
        .await?;
    let cancelled = crate::transitions::compute::cancel_pending_of_disabled(tx, Some(uid)).await?;
    let revoked = tokens::revoke_all(tx, uid).await?;
    Ok(format!(
        "; account disabled, its sessions ended, {revoked} API token(s) revoked, {cancelled} pending compute task(s) cancelled"
    ))
}

/// A just-in-time account for a directory account seen for the first time.
async fn create(pool: &Pool, id: &ExternalIdentity, who: &str, d: &Decision) -> Result<User, PlatformError> {
    let username = id.username.trim().to_lowercase();
    if validate::username(&username).is_err() {
        let refusal = format!(
            "your directory user name \"{}\" cannot be a Gantry user name (a lowercase letter first, then letters, digits, '-', '_' or '.'; at most {} characters) — ask your administrator",
            id.username.chars().take(64).collect::<String>(),
            gantry_core::Limits::NAME_MAX
        );
        audit::record(pool, None, "sso.refused", &format!("{who}: user name unusable")).await?;
        return Err(PlatformError::Refused(refusal));
    }
    let mut tx = crate::transitions::begin(pool).await?;
    let taken: Option<(i64,)> =
        sqlx::query_as("SELECT id FROM users WHERE username = ?").bind(&username).fetch_optional(&mut *tx).await?;
    if taken.is_some() {
        audit::record(&mut *tx, None, "sso.refused", &format!("{who}: a local account named {username} exists"))
            .await?;
        tx.commit().await?;
        return Err(PlatformError::Refused(format!(
            "a Gantry account named \"{username}\" already exists and is not linked to your directory account; ask your administrator"
        )));
    }
    let (gid,): (i64,) =
        sqlx::query_as("SELECT id FROM groups WHERE name = ?").bind(&d.group).fetch_one(&mut *tx).await?;
    let uid =
        sqlx::query("INSERT INTO users (username, password_hash, role, group_id, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(&username)
            .bind(SSO_PASSWORD_HASH)
            .bind(d.role.as_str())
            .bind(gid)
            .bind(now())
            .execute(&mut *tx)
            .await?
            .last_insert_rowid();
    sqlx::query(
        "INSERT INTO external_identities (provider, subject, user_id, created_at, last_sign_in) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(&id.provider)
    .bind(&id.subject)
    .bind(uid)
    .bind(now())
    .bind(now())
    .execute(&mut *tx)
    .await
    .map_err(|e| {
        // Two first sign-ins at once: the other made it.
        if is_unique_violation(&e) {
            PlatformError::Conflict("this account is being signed in elsewhere; try again".into())
        } else {
            e.into()
        }
    })?;
    let detail = format!("{who} → user {username} ({}) in group {} via directory group {}", d.role, d.group, d.via);
    audit::record(&mut *tx, Some(uid), "sso.account_created", &detail).await?;
    tx.commit().await?;
    accounts::user_by_id(pool, uid).await?.ok_or_else(|| PlatformError::NotFound("user".into()))
}

/// A known account brought in line with its mapping: enabled again if a
/// previous sign-in disabled it, moved to its group (through
/// `accounts::set_group`, then its sessions ended), given its role.
async fn update(pool: &Pool, uid: i64, by_sso: bool, who: &str, d: &Decision) -> Result<User, PlatformError> {
    let user = accounts::user_by_id(pool, uid).await?.ok_or_else(|| PlatformError::NotFound("user".into()))?;
    if user.disabled {
        if !by_sso {
            audit::record(pool, Some(uid), "sso.refused", &format!("{who}: account disabled by an administrator"))
                .await?;
            return Err(PlatformError::Refused("this account is disabled; ask an administrator".into()));
        }
        let mut tx = crate::transitions::begin(pool).await?;
        sqlx::query("UPDATE users SET disabled = 0 WHERE id = ?").bind(uid).execute(&mut *tx).await?;
        sqlx::query("UPDATE external_identities SET disabled_by_sso = 0 WHERE user_id = ?")
            .bind(uid)
            .execute(&mut *tx)
            .await?;
        audit::record(
            &mut *tx,
            Some(uid),
            "sso.sign_in",
            &format!("{who} is in a mapped group again: account enabled"),
        )
        .await?;
        tx.commit().await?;
    }
    if user.group_name != d.group {
        accounts::set_group(pool, uid, uid, &d.group).await.map_err(|e| match e {
            PlatformError::Refused(why) => PlatformError::Refused(format!(
                "the directory moved you to group {}, but the move is refused: {why} — ask your administrator",
                d.group
            )),
            other => other,
        })?;
        let mut tx = crate::transitions::begin(pool).await?;
        // A group move ends the account's sessions: what a session showed
        // and could do was the old group's.
        sqlx::query("UPDATE users SET session_gen = session_gen + 1 WHERE id = ?").bind(uid).execute(&mut *tx).await?;
        let detail = format!("{who}: group {} → {} via directory group {}", user.group_name, d.group, d.via);
        audit::record(&mut *tx, Some(uid), "sso.group_changed", &detail).await?;
        tx.commit().await?;
    }
    if user.role != d.role {
        set_role(pool, uid, who, user.role, d.role).await?;
    }
    accounts::user_by_id(pool, uid).await?.ok_or_else(|| PlatformError::NotFound("user".into()))
}

/// The role the mapping gives, as an admin's role change: sessions end and
/// API tokens are revoked. Not refused for the last administrator: the
/// directory decides, and the break-glass admin is the way back in.
async fn set_role(pool: &Pool, uid: i64, who: &str, was: Role, role: Role) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    sqlx::query("UPDATE users SET role = ?, session_gen = session_gen + 1 WHERE id = ?")
        .bind(role.as_str())
        .bind(uid)
        .execute(&mut *tx)
        .await?;
    let revoked = tokens::revoke_all(&mut tx, uid).await?;
    let detail = format!("{who}: role {was} → {role}; {revoked} API token(s) revoked");
    audit::record(&mut *tx, Some(uid), "sso.role_changed", &detail).await?;
    tx.commit().await?;
    Ok(())
}
