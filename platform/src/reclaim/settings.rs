//! The reclaim/rebalance settings row, exemptions and opt-outs. Every
//! change is checked by the core first (a bad value changes nothing) and
//! audited with the values.

use crate::{accounts::User, audit, db::Pool, machines::visibility, transitions, PlatformError};
use gantry_core::{
    rebalance::HotSettings,
    reclaim::{windows_outlast_samples, ReclaimSettings},
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub reclaim: ReclaimSettings,
    pub hot: HotSettings,
}

type Row = (bool, f64, i64, i64, i64, i64, bool, f64, f64, f64, i64);

pub async fn load_settings(pool: &Pool) -> Result<Settings, PlatformError> {
    let r: Row = sqlx::query_as(
        "SELECT enabled, threshold_pct, window_secs, grace_secs, extensions_allowed, extension_secs,
                hot_enabled, hot_util_pct, hot_mem_pct, hot_temp_c, hot_window_secs FROM reclaim_settings WHERE id = 1",
    )
    .fetch_one(pool)
    .await?;
    Ok(Settings {
        reclaim: ReclaimSettings {
            enabled: r.0,
            threshold_pct: r.1,
            window_secs: r.2,
            grace_secs: r.3,
            extensions_allowed: r.4.max(0) as u32,
            extension_secs: r.5,
        },
        hot: HotSettings { enabled: r.6, util_pct: r.7, mem_pct: r.8, temp_c: r.9, window_secs: r.10 },
    })
}

/// How long raw GPU samples are kept, as the last start recorded it.
pub async fn raw_retention_secs(db: impl sqlx::SqliteExecutor<'_>) -> Result<i64, PlatformError> {
    Ok(sqlx::query_scalar("SELECT telemetry_raw_secs FROM reclaim_settings WHERE id = 1").fetch_one(db).await?)
}

/// Records, at start, how long this server keeps raw GPU samples, and says
/// why the saved windows cannot be watched any more, if a shorter
/// retention than before makes them outlast the samples (the settings are
/// left as the admin saved them; the Reclaim page shows the same words).
pub async fn note_raw_retention(pool: &Pool, raw_keep_secs: i64) -> Result<Vec<String>, PlatformError> {
    sqlx::query("UPDATE reclaim_settings SET telemetry_raw_secs = ? WHERE id = 1")
        .bind(raw_keep_secs)
        .execute(pool)
        .await?;
    let s = load_settings(pool).await?;
    Ok(windows_outlast_samples(&s.reclaim, &s.hot, raw_keep_secs))
}

fn require_admin(who: &User) -> Result<(), PlatformError> {
    if who.role.is_admin() {
        Ok(())
    } else {
        Err(PlatformError::Conflict("only an administrator can change reclaim settings".into()))
    }
}

pub async fn save_settings(pool: &Pool, who: &User, s: &Settings) -> Result<(), PlatformError> {
    require_admin(who)?;
    s.reclaim.check().map_err(PlatformError::BadRequest)?;
    s.hot.check().map_err(PlatformError::BadRequest)?;
    let mut tx = transitions::begin(pool).await?;
    // Read in the same (immediate) transaction as the write: a start that
    // shortens the retention meanwhile waits for it, then flags the result.
    let raw_keep = raw_retention_secs(&mut *tx).await?;
    let unwatchable = windows_outlast_samples(&s.reclaim, &s.hot, raw_keep);
    if !unwatchable.is_empty() {
        return Err(PlatformError::BadRequest(unwatchable.join("; ")));
    }
    sqlx::query(
        "UPDATE reclaim_settings SET enabled = ?, threshold_pct = ?, window_secs = ?, grace_secs = ?, extensions_allowed = ?, extension_secs = ?,
                hot_enabled = ?, hot_util_pct = ?, hot_mem_pct = ?, hot_temp_c = ?, hot_window_secs = ?, updated_at = ? WHERE id = 1",
    )
    .bind(s.reclaim.enabled)
    .bind(s.reclaim.threshold_pct)
    .bind(s.reclaim.window_secs)
    .bind(s.reclaim.grace_secs)
    .bind(s.reclaim.extensions_allowed as i64)
    .bind(s.reclaim.extension_secs)
    .bind(s.hot.enabled)
    .bind(s.hot.util_pct)
    .bind(s.hot.mem_pct)
    .bind(s.hot.temp_c)
    .bind(s.hot.window_secs)
    .bind(crate::now())
    .execute(&mut *tx)
    .await?;
    let r = &s.reclaim;
    let h = &s.hot;
    let detail = format!(
        "idle reclaim {}: threshold {} %, window {} s, grace {} s, {} extension(s) of {} s; rebalancing {}: {} % utilisation, {} % memory, {} °C for {} s",
        if r.enabled { "on" } else { "off" },
        r.threshold_pct,
        r.window_secs,
        r.grace_secs,
        r.extensions_allowed,
        r.extension_secs,
        if h.enabled { "on" } else { "off" },
        h.util_pct,
        h.mem_pct,
        h.temp_c,
        h.window_secs
    );
    audit::record(&mut *tx, Some(who.id), "reclaim.settings", &detail).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn set_group_exempt(pool: &Pool, who: &User, group_id: i64, exempt: bool) -> Result<(), PlatformError> {
    require_admin(who)?;
    let mut tx = transitions::begin(pool).await?;
    let name: String = sqlx::query_scalar("SELECT name FROM groups WHERE id = ?")
        .bind(group_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| PlatformError::NotFound("group".into()))?;
    sqlx::query("UPDATE groups SET reclaim_exempt = ? WHERE id = ?")
        .bind(exempt)
        .bind(group_id)
        .execute(&mut *tx)
        .await?;
    let mut detail = format!("group {name} {} idle reclaim", if exempt { "exempt from" } else { "subject to" });
    if exempt {
        // Reclaims queued but not started are cancelled now; the next pass
        // withdraws the warnings (and a runner already under way stops).
        let warned: Vec<i64> = sqlx::query_scalar(
            "SELECT DISTINCT t.machine_id FROM tasks t JOIN machines m ON m.id = t.machine_id
             WHERE m.group_id = ? AND t.kind = 'reclaim' AND t.state IN ('pending', 'scheduled')",
        )
        .bind(group_id)
        .fetch_all(&mut *tx)
        .await?;
        let reason = format!("group {name} was exempted from idle reclaim by {}", who.username);
        let mut cancelled = 0;
        for id in warned {
            cancelled += transitions::reclaim::exempted(&mut tx, id, &reason).await?.is_some() as usize;
        }
        if cancelled > 0 {
            detail.push_str(&format!("; {cancelled} queued reclaim(s) cancelled"));
        }
    }
    audit::record(&mut *tx, Some(who.id), "reclaim.exempt", &detail).await?;
    tx.commit().await?;
    Ok(())
}

pub async fn set_machine_exempt(pool: &Pool, who: &User, machine_id: i64, exempt: bool) -> Result<(), PlatformError> {
    require_admin(who)?;
    let mut tx = transitions::begin(pool).await?;
    let name: String = sqlx::query_scalar("SELECT name FROM machines WHERE id = ?")
        .bind(machine_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    sqlx::query("UPDATE machines SET reclaim_exempt = ? WHERE id = ?")
        .bind(exempt)
        .bind(machine_id)
        .execute(&mut *tx)
        .await?;
    let mut detail = format!("machine {name} {} idle reclaim", if exempt { "exempt from" } else { "subject to" });
    // A reclaim queued but not started is cancelled now (one under way is
    // stopped by its runner, which sees the exemption); the next pass
    // withdraws the warning.
    if exempt {
        if let Some(task_id) = transitions::reclaim::exempted(
            &mut tx,
            machine_id,
            &format!("exempted from idle reclaim by {}", who.username),
        )
        .await?
        {
            detail.push_str(&format!("; its queued reclaim (task #{task_id}) was cancelled"));
        }
    }
    audit::record(&mut *tx, Some(who.id), "reclaim.exempt", &detail).await?;
    tx.commit().await?;
    Ok(())
}

/// The owner (or an admin) keeps a machine where it is, or lets it move.
/// Opting out cancels a move queued for it and not started; its id.
pub async fn set_rebalance_opt_out(
    pool: &Pool,
    who: &User,
    machine_id: i64,
    opt_out: bool,
) -> Result<Option<i64>, PlatformError> {
    let mut tx = transitions::begin(pool).await?;
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(String, i64)> =
        sqlx::query_as(&format!("SELECT name, owner_id FROM machines WHERE id = ? AND ({cond})"))
            .bind(machine_id)
            .bind(bind)
            .fetch_optional(&mut *tx)
            .await?;
    let (name, owner) = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict("only the machine's owner, or an admin, can change this".into()));
    }
    sqlx::query("UPDATE machines SET rebalance_opt_out = ? WHERE id = ?")
        .bind(opt_out)
        .bind(machine_id)
        .execute(&mut *tx)
        .await?;
    let what = if opt_out { "opted out of" } else { "opted in to" };
    let mut detail = format!("machine {name} {what} hot-GPU rebalancing");
    // A move queued but not started is cancelled now; one a runner has
    // claimed stops before it touches the container, if it still can.
    let cancelled = if opt_out { transitions::rebalance::cancel_queued(&mut tx, machine_id).await? } else { None };
    if let Some(task_id) = cancelled {
        detail.push_str(&format!("; its queued move (task #{task_id}) was cancelled"));
    }
    audit::record(&mut *tx, Some(who.id), "rebalance.opt_out", &detail).await?;
    tx.commit().await?;
    Ok(cancelled)
}
