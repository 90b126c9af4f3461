//! Whether local passwords still sign in (table `sso_settings`, migration
//! 0045). By default they do. An admin may turn them off except for one
//! break-glass administrator, the way in when the directory is down or
//! its mappings are wrong.

use crate::{audit, db::Pool, PlatformError};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub local_passwords_off: bool,
    /// The one local account that signs in with its password when local
    /// passwords are off.
    pub break_glass_admin: Option<String>,
}

impl Settings {
    /// Whether `username` may sign in with a local password now.
    pub fn local_password_allowed(&self, username: &str) -> bool {
        !self.local_passwords_off || self.break_glass_admin.as_deref() == Some(username)
    }
}

pub async fn settings(pool: &Pool) -> Result<Settings, PlatformError> {
    let row: Option<(bool, Option<String>)> =
        sqlx::query_as("SELECT local_passwords_off, break_glass_admin FROM sso_settings WHERE id = 1")
            .fetch_optional(pool)
            .await?;
    Ok(row.map(|(off, name)| Settings { local_passwords_off: off, break_glass_admin: name }).unwrap_or_default())
}

/// The break-glass admin must be an enabled local administrator: an
/// account made by a directory sign-in has no local password, and a user
/// could not repair the mappings.
async fn check_break_glass(tx: &mut crate::transitions::Tx, name: &str) -> Result<(), PlatformError> {
    let row: Option<(String, bool, bool)> = sqlx::query_as(
        "SELECT u.role, u.disabled, EXISTS (SELECT 1 FROM external_identities e WHERE e.user_id = u.id)
         FROM users u WHERE u.username = ?",
    )
    .bind(name)
    .fetch_optional(&mut **tx)
    .await?;
    match row {
        Some((role, false, false)) if role == "admin" => Ok(()),
        _ => Err(PlatformError::BadRequest(format!(
            "the break-glass admin \"{}\" must be an enabled local administrator account",
            name.chars().take(40).collect::<String>()
        ))),
    }
}

/// Turns local passwords off (except for `break_glass_admin`, required
/// then) or on again. Audited as `sso.local_passwords`.
pub async fn set_local_passwords(
    pool: &Pool,
    actor: i64,
    off: bool,
    break_glass_admin: Option<&str>,
) -> Result<Settings, PlatformError> {
    let name = break_glass_admin.map(str::trim).filter(|n| !n.is_empty());
    let mut tx = crate::transitions::begin(pool).await?;
    match (off, name) {
        (true, None) => {
            return Err(PlatformError::BadRequest(
                "name a break-glass admin before turning local passwords off: without one, nobody could sign in while the directory is down".into(),
            ))
        }
        (_, Some(n)) => check_break_glass(&mut tx, n).await?,
        (false, None) => {}
    }
    sqlx::query("UPDATE sso_settings SET local_passwords_off = ?, break_glass_admin = ? WHERE id = 1")
        .bind(off)
        .bind(name)
        .execute(&mut *tx)
        .await?;
    let detail = match (off, name) {
        (true, Some(n)) => format!("local passwords off except the break-glass admin {n}"),
        (_, Some(n)) => format!("local passwords on; break-glass admin {n}"),
        _ => "local passwords on".to_string(),
    };
    audit::record(&mut *tx, Some(actor), "sso.local_passwords", &detail).await?;
    tx.commit().await?;
    settings(pool).await
}

/// `--break-glass-admin NAME` at start: names the break-glass admin
/// (checked like the page's). The switch itself stays as the admin left it.
pub async fn set_break_glass_admin(pool: &Pool, name: &str) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    check_break_glass(&mut tx, name).await?;
    let changed =
        sqlx::query("UPDATE sso_settings SET break_glass_admin = ? WHERE id = 1 AND break_glass_admin IS NOT ?")
            .bind(name)
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
    if changed > 0 {
        audit::record(
            &mut *tx,
            None,
            "sso.local_passwords",
            &format!("break-glass admin {name} (--break-glass-admin)"),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
