//! Who may in: the key names the account (`ssh_keys::holder`), the SSH
//! user name names the machine — `NAME` (one's own) or `OWNER/NAME` (an
//! administrator reaching someone's) — and the workspace rules decide, as
//! for the browser terminal: owner or admin, another group's machine does
//! not exist. A refused key counts against the client address's throttle
//! (the sign-in throttle's per-address policy, under its own key), and a
//! locked address is refused before anything is looked up.

use gantry_core::throttle::ThrottlePolicy;
use gantry_platform::{
    accounts::User,
    db::Pool,
    ssh_keys, throttle,
    workspace::{self, Refusal, Target},
    PlatformError,
};
use std::net::IpAddr;

/// A key and user name that may enter.
pub struct Admitted {
    pub key_id: i64,
    pub user: User,
    pub target: Target,
}

/// Why a connection was refused (for the log; the client only hears
/// "Permission denied", as sshd says it).
pub type Denied = String;

fn throttle_keys(addr: Option<IpAddr>) -> Vec<(String, ThrottlePolicy)> {
    let addr = addr.map(|a| gantry_core::throttle::counted_address(&a.to_string()));
    vec![(format!("ssh:addr:{}", addr.as_deref().unwrap_or("unknown")), ThrottlePolicy::PER_ADDRESS)]
}

/// Refused while the address is locked.
pub async fn locked(pool: &Pool, addr: Option<IpAddr>) -> Result<Option<Denied>, PlatformError> {
    Ok(throttle::locked(pool, &throttle_keys(addr))
        .await?
        .map(|secs| format!("too many refused keys from this address; locked for {secs} s more")))
}

/// Counts one refused key for the address.
pub async fn count_failure(pool: &Pool, addr: Option<IpAddr>) {
    match throttle::count_attempt(pool, &throttle_keys(addr)).await {
        Ok(_) | Err(PlatformError::Throttled { .. }) => {}
        Err(e) => tracing::warn!(error = %e, "could not count a refused SSH key"),
    }
}

/// The account holding the key with `fingerprint`, if any may use it now.
pub async fn account(pool: &Pool, fingerprint: &str) -> Result<Result<(i64, User), Denied>, PlatformError> {
    let Some((key_id, user)) = ssh_keys::holder(pool, fingerprint).await? else {
        return Ok(Err(format!("no account has the key {fingerprint}")));
    };
    if user.disabled {
        return Ok(Err(format!("the account {} is disabled", user.username)));
    }
    if user.must_change_password {
        return Ok(Err(format!("the account {} must choose a new password on the web first", user.username)));
    }
    Ok(Ok((key_id, user)))
}

/// Key and machine together: `Err` when the machine does not exist for
/// this account (or another group's) or the account may not enter it.
/// A machine that is not running is admitted: the session says why it
/// cannot start (see `Target::require_running`).
pub async fn admit(pool: &Pool, ssh_user: &str, fingerprint: &str) -> Result<Result<Admitted, Denied>, PlatformError> {
    let (key_id, user) = match account(pool, fingerprint).await? {
        Ok(found) => found,
        Err(denied) => return Ok(Err(denied)),
    };
    let (owner, name) = match ssh_user.split_once('/') {
        Some((owner, name)) => (owner, name),
        None => (user.username.as_str(), ssh_user),
    };
    let id: Option<i64> = sqlx::query_scalar(
        "SELECT m.id FROM machines m JOIN users u ON u.id = m.owner_id
         WHERE m.name = ? AND u.username = ? AND m.state <> 'deleted'",
    )
    .bind(name)
    .bind(owner)
    .fetch_optional(pool)
    .await?;
    let Some(id) = id else {
        return Ok(Err(format!("{} asked for machine {owner}/{name}, which does not exist", user.username)));
    };
    match workspace::target(pool, &user, id).await? {
        Ok(target) => Ok(Ok(Admitted { key_id, user, target })),
        Err(Refusal::NotFound) => {
            Ok(Err(format!("{} asked for machine {owner}/{name}, which their group cannot see", user.username)))
        }
        Err(r) => Ok(Err(format!("{} asked for machine {owner}/{name}: {r}", user.username))),
    }
}
