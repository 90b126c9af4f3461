//! The settings schedules read: a user's time zone (their account page)
//! and a group's longest run without a stop (Admin → Groups). Both are
//! validated before anything is written, and audited.

use crate::{accounts::User, audit, db::Pool, transitions::begin, PlatformError};

/// A user's time zone (IANA name); UTC until they choose one.
pub async fn time_zone(pool: &Pool, user_id: i64) -> Result<String, PlatformError> {
    let tz: Option<String> = sqlx::query_scalar("SELECT time_zone FROM user_time_zones WHERE user_id = ?")
        .bind(user_id)
        .fetch_optional(pool)
        .await?;
    Ok(tz.unwrap_or_else(|| "UTC".into()))
}

/// Sets `who`'s own time zone; its canonical name. A name the bundled
/// rules do not know is refused and nothing changes.
pub async fn set_time_zone(pool: &Pool, who: &User, name: &str) -> Result<String, PlatformError> {
    let (_, canonical) = gantry_core::schedule::zone(name).map_err(PlatformError::BadRequest)?;
    let mut tx = begin(pool).await?;
    sqlx::query(
        "INSERT INTO user_time_zones (user_id, time_zone) VALUES (?, ?)
         ON CONFLICT (user_id) DO UPDATE SET time_zone = excluded.time_zone",
    )
    .bind(who.id)
    .bind(&canonical)
    .execute(&mut *tx)
    .await?;
    let detail = format!("{}'s time zone set to {canonical}", who.username);
    audit::record(&mut *tx, Some(who.id), "account.time_zone", &detail).await?;
    tx.commit().await?;
    Ok(canonical)
}

/// A group's longest run without a stop, in hours; 0: no limit.
pub async fn group_max_run(pool: &Pool, group_id: i64) -> Result<u32, PlatformError> {
    let hours: Option<i64> = sqlx::query_scalar("SELECT max_run_hours FROM group_run_limits WHERE group_id = ?")
        .bind(group_id)
        .fetch_optional(pool)
        .await?;
    Ok(hours.unwrap_or(0).clamp(0, 8760) as u32)
}

/// An admin sets a group's longest run (0 = no limit), audited as
/// `group.update`. Machines already running past it are warned at the
/// next pass and stopped a warning window later, never at once.
pub async fn set_group_max_run(pool: &Pool, who: &User, group_id: i64, hours: i64) -> Result<u32, PlatformError> {
    if !who.is_admin() {
        return Err(PlatformError::Conflict("only an admin can set a group's longest run".into()));
    }
    if hours < 0 {
        return Err(PlatformError::BadRequest(format!("the longest run must not be negative (got {hours} h)")));
    }
    if hours > 8760 {
        return Err(PlatformError::BadRequest(format!("the longest run is at most 8760 h (a year), got {hours}")));
    }
    let mut tx = begin(pool).await?;
    let name: Option<String> =
        sqlx::query_scalar("SELECT name FROM groups WHERE id = ?").bind(group_id).fetch_optional(&mut *tx).await?;
    let name = name.ok_or_else(|| PlatformError::NotFound("group".into()))?;
    let before: Option<i64> = sqlx::query_scalar("SELECT max_run_hours FROM group_run_limits WHERE group_id = ?")
        .bind(group_id)
        .fetch_optional(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO group_run_limits (group_id, max_run_hours) VALUES (?, ?)
         ON CONFLICT (group_id) DO UPDATE SET max_run_hours = excluded.max_run_hours",
    )
    .bind(group_id)
    .bind(hours)
    .execute(&mut *tx)
    .await?;
    let shown = |h: i64| if h == 0 { "no limit".to_string() } else { format!("{h} h") };
    let detail = format!(
        "group {name}: longest run without a stop set to {} (was {})",
        shown(hours),
        shown(before.unwrap_or(0))
    );
    audit::record(&mut *tx, Some(who.id), "group.update", &detail).await?;
    tx.commit().await?;
    Ok(hours as u32)
}
