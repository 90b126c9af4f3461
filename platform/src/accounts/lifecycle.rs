//! An account's life after creation: disabled and enabled, a temporary
//! password set by an admin, the user's own password change, role and group
//! changes. Each change is one `BEGIN IMMEDIATE` transaction with its audit
//! row; changes that must end the account's sessions bump `session_gen`
//! (the session middleware compares it on every request). Those, and a
//! group change, revoke the account's API tokens in the same commit
//! (`tokens::revoke_all`), the audit row saying how many: a token made by
//! whoever held a session or the password must not survive the remedy.

use super::{user_by_id, User};
use crate::{audit, db::Pool, password, throttle, tokens, PlatformError};
use gantry_core::{validate, Role};

use crate::transitions::Tx;

async fn target(tx: &mut Tx, user_id: i64) -> Result<(String, String, bool), PlatformError> {
    sqlx::query_as("SELECT username, role, disabled FROM users WHERE id = ?")
        .bind(user_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| PlatformError::NotFound("user".into()))
}

/// Refuses a change that would leave no enabled administrator.
async fn keep_an_admin(tx: &mut Tx, user_id: i64) -> Result<(), PlatformError> {
    let (others,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled = 0 AND id <> ?")
            .bind(user_id)
            .fetch_one(&mut **tx)
            .await?;
    if others == 0 {
        return Err(PlatformError::Refused("this is the last enabled administrator; make another one first".into()));
    }
    Ok(())
}

/// The audit detail of an account change, with the tokens it revoked.
fn with_revoked(detail: String, revoked: u64) -> String {
    match revoked {
        0 => detail,
        n => format!("{detail}; {n} API token(s) revoked"),
    }
}

async fn finish(pool: &Pool, tx: Tx, user_id: i64) -> Result<User, PlatformError> {
    tx.commit().await?;
    user_by_id(pool, user_id).await?.ok_or_else(|| PlatformError::NotFound("user".into()))
}

/// Marks an account's password as temporary: the next sign-in must choose
/// a new one (the first administrator's generated password).
pub async fn require_new_password(pool: &Pool, user_id: i64) -> Result<(), PlatformError> {
    sqlx::query("UPDATE users SET must_change_password = 1 WHERE id = ?").bind(user_id).execute(pool).await?;
    Ok(())
}

/// Disables (its sessions end at once, its API tokens are revoked) or
/// enables an account (which revives no token). Disabling
/// cancels its compute tasks not yet placed, in the same commit: they would
/// start later and use the group's quota for an account nobody may use.
/// Its machines and placed tasks are left to an admin.
pub async fn set_disabled(pool: &Pool, actor: i64, user_id: i64, disabled: bool) -> Result<User, PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    let (name, role, was) = target(&mut tx, user_id).await?;
    if disabled && user_id == actor {
        return Err(PlatformError::Refused("you cannot disable your own account".into()));
    }
    if disabled && role == Role::Admin.as_str() {
        keep_an_admin(&mut tx, user_id).await?;
    }
    if was != disabled {
        sqlx::query("UPDATE users SET disabled = ?, session_gen = session_gen + 1 WHERE id = ?")
            .bind(disabled)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let action = if disabled { "user.disable" } else { "user.enable" };
        let mut detail = format!("user {name}");
        if disabled {
            let cancelled = crate::transitions::compute::cancel_pending_of_disabled(&mut tx, Some(user_id)).await?;
            if cancelled > 0 {
                detail.push_str(&format!("; {cancelled} pending compute task(s) cancelled"));
            }
            // Revoked, not suspended: enabling the account again revives none.
            detail = with_revoked(detail, tokens::revoke_all(&mut tx, user_id).await?);
        }
        audit::record(&mut *tx, Some(actor), action, &detail).await?;
    }
    finish(pool, tx, user_id).await
}

/// An admin sets a temporary password: the account's sessions end, its API
/// tokens are revoked (a reset is what follows a leaked password, and a
/// token made by whoever had it must not outlive it), and its next sign-in
/// must choose a new password before anything else.
pub async fn reset_password(pool: &Pool, actor: i64, user_id: i64, temporary: &str) -> Result<User, PlatformError> {
    validate::new_password(temporary)?;
    let hash = password::hash(temporary).await?;
    let mut tx = crate::transitions::begin(pool).await?;
    let (name, _, _) = target(&mut tx, user_id).await?;
    sqlx::query(
        "UPDATE users SET password_hash = ?, must_change_password = 1, session_gen = session_gen + 1 WHERE id = ?",
    )
    .bind(&hash)
    .bind(user_id)
    .execute(&mut *tx)
    .await?;
    let revoked = tokens::revoke_all(&mut tx, user_id).await?;
    let detail = with_revoked(format!("temporary password for user {name}"), revoked);
    audit::record(&mut *tx, Some(actor), "user.reset_password", &detail).await?;
    // In the same commit: a reset that took effect never leaves its user
    // locked out by the guesses that may have prompted it.
    throttle::clear_user(&mut tx, &name).await?;
    finish(pool, tx, user_id).await
}

/// Checks that `password` is `who`'s own, as a sign-in does: the attempt
/// counted by the sign-in throttle (account and client address) before the
/// argon2 verification, forgiven when it was right. `Ok(false)` for a
/// wrong password; `Err(Throttled)` when too many were tried. What a
/// session asks for with the password (a new one, an API token) uses it.
pub async fn confirm_password(
    pool: &Pool,
    gate: &password::Gate,
    who: &User,
    password: &str,
    address: Option<&str>,
) -> Result<bool, PlatformError> {
    Ok(confirmed_hash(pool, gate, who, password, address).await?.is_some())
}

/// [`confirm_password`], answering with the stored hash it matched.
async fn confirmed_hash(
    pool: &Pool,
    gate: &password::Gate,
    who: &User,
    password: &str,
    address: Option<&str>,
) -> Result<Option<String>, PlatformError> {
    validate::present_password(password)?;
    let counted = throttle::count_attempt(pool, &throttle::keys(&who.username, address)).await?;
    let (stored,): (String,) =
        sqlx::query_as("SELECT password_hash FROM users WHERE id = ?").bind(who.id).fetch_one(pool).await?;
    if !super::verify_counted(pool, gate, &counted, &stored, password).await? {
        return Ok(None);
    }
    throttle::forgive(pool, &counted).await?;
    Ok(Some(stored))
}

/// The user's own change: the current password (counted by the sign-in
/// throttle like a sign-in), then the new one. Other sessions of the
/// account end and its API tokens are revoked; the caller stamps its own session with the returned
/// account's `session_gen`. `who` is the account as the request's session
/// found it: if anything changed it since (an admin's reset, disable or
/// role change all move `session_gen`; a group change does not, and needs
/// not: the password is the same account's) or the password checked is no
/// longer the stored one, nothing is written — the two argon2 runs take a
/// while, and writing over a reset would undo it and keep this session.
pub async fn change_password(
    pool: &Pool,
    gate: &password::Gate,
    who: &User,
    current: &str,
    new: &str,
    address: Option<&str>,
) -> Result<User, PlatformError> {
    validate::present_password(current)?;
    validate::new_password(new)?;
    if current == new {
        return Err(PlatformError::BadRequest("the new password must differ from the current one".into()));
    }
    let Some(stored) = confirmed_hash(pool, gate, who, current, address).await? else {
        return Err(PlatformError::BadRequest("the current password is wrong".into()));
    };
    let hash = password::hash_with(gate, new).await?;
    let mut tx = crate::transitions::begin(pool).await?;
    let changed = sqlx::query(
        "UPDATE users SET password_hash = ?, must_change_password = 0, session_gen = session_gen + 1
         WHERE id = ? AND session_gen = ? AND password_hash = ? AND NOT disabled",
    )
    .bind(&hash)
    .bind(who.id)
    .bind(who.session_gen)
    .bind(&stored)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if changed == 0 {
        return Err(PlatformError::Conflict(
            "your account was changed while the password was being checked (a reset, or an administrator's change); nothing was changed".into(),
        ));
    }
    let revoked = tokens::revoke_all(&mut tx, who.id).await?;
    let detail = with_revoked(format!("user {} changed their password", who.username), revoked);
    audit::record(&mut *tx, Some(who.id), "user.change_password", &detail).await?;
    finish(pool, tx, who.id).await
}

/// Makes an account a user or an admin. The account's sessions end (a
/// demoted admin's must) and its API tokens are revoked: a token acts with
/// the role of its use, and one made under another role is not kept.
pub async fn set_role(pool: &Pool, actor: i64, user_id: i64, role: Role) -> Result<User, PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    let (name, was, _) = target(&mut tx, user_id).await?;
    if was != role.as_str() {
        if was == Role::Admin.as_str() {
            keep_an_admin(&mut tx, user_id).await?;
        }
        sqlx::query("UPDATE users SET role = ?, session_gen = session_gen + 1 WHERE id = ?")
            .bind(role.as_str())
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let revoked = tokens::revoke_all(&mut tx, user_id).await?;
        let detail = with_revoked(format!("user {name}: {was} → {role}"), revoked);
        audit::record(&mut *tx, Some(actor), "user.role", &detail).await?;
    }
    finish(pool, tx, user_id).await
}

/// Moves an account to another group; its quota is the new group's from
/// now on, and its API tokens are revoked (a script written for the old
/// group's work must not carry on in the new one unasked). Refused while it owns anything in its current group — live
/// machines, open compute tasks, kept volumes: they would stay charged to
/// the old group, where its owner (now outside it) could no longer see
/// them and its old colleagues may not act on them, and a queued task
/// would wait in the old group's queue but be charged to the new one.
pub async fn set_group(pool: &Pool, actor: i64, user_id: i64, group: &str) -> Result<User, PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    let (name, _, _) = target(&mut tx, user_id).await?;
    let gid: Option<(i64,)> =
        sqlx::query_as("SELECT id FROM groups WHERE name = ?").bind(group).fetch_optional(&mut *tx).await?;
    let (gid,) = gid
        .ok_or_else(|| PlatformError::NotFound(format!("group \"{}\"", group.chars().take(40).collect::<String>())))?;
    let (current,): (i64,) =
        sqlx::query_as("SELECT group_id FROM users WHERE id = ?").bind(user_id).fetch_one(&mut *tx).await?;
    if current == gid {
        return finish(pool, tx, user_id).await;
    }
    refuse_if_owning(&mut tx, user_id, &name).await?;
    sqlx::query("UPDATE users SET group_id = ? WHERE id = ?").bind(gid).bind(user_id).execute(&mut *tx).await?;
    let revoked = tokens::revoke_all(&mut tx, user_id).await?;
    let detail = with_revoked(format!("user {name} → group {group}"), revoked);
    audit::record(&mut *tx, Some(actor), "user.group", &detail).await?;
    finish(pool, tx, user_id).await
}

/// The refusal of a group move, with what the account still owns.
async fn refuse_if_owning(tx: &mut Tx, user_id: i64, name: &str) -> Result<(), PlatformError> {
    let (machines, tasks, volumes, snapshots): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM machines WHERE owner_id = ?1 AND state NOT IN ('deleted', 'lost')),
                (SELECT COUNT(*) FROM compute_tasks WHERE requester_id = ?1 AND state IN ('pending', 'scheduled', 'running')),
                (SELECT COUNT(*) FROM kept_volumes WHERE owner_id = ?1),
                (SELECT COUNT(*) FROM snapshots WHERE owner_id = ?1)",
    )
    .bind(user_id)
    .fetch_one(&mut **tx)
    .await?;
    // Snapshots too: they stay in (and count against) the old group, where
    // their owner could no longer see or delete them.
    let owned: Vec<String> = [
        (machines, "machine(s)"),
        (tasks, "open compute task(s)"),
        (volumes, "kept volume(s)"),
        (snapshots, "snapshot(s)"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if owned.is_empty() {
        return Ok(());
    }
    Err(PlatformError::Refused(format!(
        "user {name} still owns {} in their current group; delete the machines, kept volumes and snapshots and cancel (or wait for) the compute tasks first, \
         then move them",
        owned.join(", ")
    )))
}
