//! Idle reclaim and hot-GPU rebalancing on the platform side: the admin's
//! settings (one audited row), exemptions and opt-outs, and the loop that
//! reads GPU samples, asks the core for decisions and applies them through
//! the transition module. The loop's pass takes the time as an argument so
//! tests run it at any instant.

mod console;
mod pass;
mod settings;

pub use console::{console, Console, GroupExemption, MachineStanding};
pub use pass::{pass, run, PassReport};
pub use settings::{
    load_settings, note_raw_retention, raw_retention_secs, save_settings, set_group_exempt, set_machine_exempt,
    set_rebalance_opt_out, Settings,
};

use crate::{accounts::User, db::Pool, machines::visibility, PlatformError};
use serde::Serialize;

/// What the portal shows about a machine's reclaim standing.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReclaimStatus {
    pub machine_id: i64,
    pub machine_name: String,
    /// Who may extend or restore it (with admins).
    pub owner_id: i64,
    pub state: String,
    pub deadline: Option<i64>,
    pub extensions_used: i64,
    pub extensions_allowed: i64,
    pub exempt: bool,
    pub rebalance_opt_out: bool,
    pub restore_snapshot_id: Option<i64>,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow, PartialEq)]
pub struct MachineEvent {
    pub at_ms: i64,
    pub kind: String,
    pub detail: String,
}

/// A machine its group's banner shows (`m` is the machine): warned while
/// it can still be reclaimed (running or stopped; a warning left on a
/// machine that failed or went away is not one), or reclaimed.
pub const NOTICE_SQL: &str =
    "(m.reclaim_deadline IS NOT NULL AND m.state IN ('running', 'stopped')) OR m.state = 'reclaimed'";

/// Warned and reclaimed machines the viewer may see (the banner).
pub async fn notices(pool: &Pool, viewer: &User) -> Result<Vec<ReclaimStatus>, PlatformError> {
    let (cond, bind) = visibility(viewer, "m.group_id");
    // An admin's banner shows the machines of their own group only; the
    // console lists everything.
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT m.id, m.name, m.owner_id, m.state, m.reclaim_deadline, m.reclaim_extensions, m.reclaim_exempt, m.rebalance_opt_out, m.restore_snapshot_id
         FROM machines m WHERE ({cond}) AND m.group_id = ? AND ({NOTICE_SQL}) ORDER BY m.id"
    ))
    .bind(bind)
    .bind(viewer.group_id)
    .fetch_all(pool)
    .await?;
    // The banner is on every page and nearly always empty: the settings
    // are read only when there is something to show.
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let allowed = load_settings(pool).await?.reclaim.extensions_allowed as i64;
    Ok(rows.into_iter().map(|r| status_from(r, allowed)).collect())
}

type Row = (i64, String, i64, String, Option<i64>, i64, bool, bool, Option<i64>);

fn status_from(
    (machine_id, machine_name, owner_id, state, deadline, used, exempt, opt_out, restore): Row,
    allowed: i64,
) -> ReclaimStatus {
    ReclaimStatus {
        machine_id,
        machine_name,
        owner_id,
        state,
        deadline,
        extensions_used: used,
        extensions_allowed: allowed,
        exempt,
        rebalance_opt_out: opt_out,
        restore_snapshot_id: restore,
    }
}

/// One machine's standing, for its page; another group's is "not found".
pub async fn status(pool: &Pool, viewer: &User, machine_id: i64) -> Result<ReclaimStatus, PlatformError> {
    let (cond, bind) = visibility(viewer, "m.group_id");
    let allowed = load_settings(pool).await?.reclaim.extensions_allowed as i64;
    let row: Option<Row> = sqlx::query_as(&format!(
        "SELECT m.id, m.name, m.owner_id, m.state, m.reclaim_deadline, m.reclaim_extensions, (m.reclaim_exempt OR g.reclaim_exempt), m.rebalance_opt_out, m.restore_snapshot_id
         FROM machines m JOIN groups g ON g.id = m.group_id WHERE m.id = ? AND ({cond})"
    ))
    .bind(machine_id)
    .bind(bind)
    .fetch_optional(pool)
    .await?;
    Ok(status_from(row.ok_or_else(|| PlatformError::NotFound("machine".into()))?, allowed))
}

/// A machine's standing and its history of reclaim/rebalance/snapshot
/// events, newest first: what its page shows, after one visibility check.
pub async fn standing(
    pool: &Pool,
    viewer: &User,
    machine_id: i64,
    limit: i64,
) -> Result<(ReclaimStatus, Vec<MachineEvent>), PlatformError> {
    let status = status(pool, viewer, machine_id).await?;
    let events =
        sqlx::query_as("SELECT at_ms, kind, detail FROM machine_events WHERE machine_id = ? ORDER BY id DESC LIMIT ?")
            .bind(machine_id)
            .bind(limit.clamp(1, 500))
            .fetch_all(pool)
            .await?;
    Ok((status, events))
}

/// The owner (or an admin) pushes the reclaim deadline back.
pub async fn extend(pool: &Pool, who: &User, machine_id: i64) -> Result<i64, PlatformError> {
    let settings = load_settings(pool).await?;
    crate::transitions::reclaim::extend(pool, who, machine_id, &settings.reclaim).await
}

pub use crate::transitions::reclaim::restore;
