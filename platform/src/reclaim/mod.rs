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
use gantry_core::{reclaim::MachineEventKind, task::MachineState};
use serde::{Deserialize, Serialize};

/// What the portal shows about a machine's reclaim standing: warned (with
/// the deadline), reclaimed (restorable), exempt, opted out of rebalancing.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow, PartialEq, Eq)]
pub struct ReclaimStatus {
    pub machine_id: i64,
    pub machine_name: String,
    /// Who may extend or restore it (with admins).
    pub owner_id: i64,
    #[sqlx(try_from = "String")]
    pub state: MachineState,
    /// Reclaim deadline (unix s) of the current warning.
    pub deadline: Option<i64>,
    pub extensions_used: i64,
    /// From the settings, not the machine's row.
    #[sqlx(skip)]
    pub extensions_allowed: i64,
    pub exempt: bool,
    pub rebalance_opt_out: bool,
    pub restore_snapshot_id: Option<i64>,
    /// Put away by its owner's stop, not by idle reclaim: no reclaim
    /// notice, and Start (on its page) rather than Restore.
    #[serde(default)]
    pub shut_down: bool,
}

impl ReclaimStatus {
    /// Under a warning that can still run out (a reclaimed machine keeps
    /// its last deadline).
    pub fn warned(&self) -> bool {
        self.deadline.is_some() && self.state != MachineState::Reclaimed
    }

    /// Reclaimed by idle reclaim (not shut down by its owner's stop).
    pub fn reclaimed(&self) -> bool {
        self.state == MachineState::Reclaimed && !self.shut_down
    }

    /// Reclaimed, and its snapshot is there: restore works. A shut-down
    /// machine is started from its page's Start instead.
    pub fn restorable(&self) -> bool {
        self.reclaimed() && self.restore_snapshot_id.is_some()
    }

    /// Seconds left until the deadline at `now` (unix s), never below 0.
    pub fn seconds_left(&self, now: i64) -> Option<i64> {
        self.deadline.map(|d| (d - now).max(0))
    }

    /// Whether `viewer` may push the deadline back now: warned, theirs (or
    /// they are an admin), and extensions are left.
    pub fn can_extend(&self, viewer: &User) -> bool {
        self.warned() && viewer.acts_for(self.owner_id) && self.extensions_used < self.extensions_allowed
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow, PartialEq, Eq)]
pub struct MachineEvent {
    pub at_ms: i64,
    #[sqlx(try_from = "String")]
    pub kind: MachineEventKind,
    pub detail: String,
}

/// The columns [`ReclaimStatus`] reads, from `machines m`; the exemption is
/// the caller's (the machine's alone, or its group's too).
const STATUS_COLUMNS: &str =
    "m.id AS machine_id, m.name AS machine_name, m.owner_id, m.state, m.reclaim_deadline AS deadline,
     m.reclaim_extensions AS extensions_used, m.rebalance_opt_out, m.restore_snapshot_id, m.shut_down";

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
    let rows: Vec<ReclaimStatus> = sqlx::query_as(&format!(
        "SELECT {STATUS_COLUMNS}, m.reclaim_exempt AS exempt
         FROM machines m WHERE ({cond}) AND m.group_id = ? AND ({NOTICE_SQL}) ORDER BY m.id"
    ))
    .bind(bind)
    .bind(viewer.group_id)
    .fetch_all(pool)
    .await?;
    // A machine its owner stopped is no reclaim's news (filtered here: the
    // query keeps to the partial index `machines_reclaim`).
    let rows: Vec<ReclaimStatus> =
        rows.into_iter().filter(|r| !(r.state == MachineState::Reclaimed && r.shut_down)).collect();
    // The banner is on every page and nearly always empty: the settings
    // are read only when there is something to show.
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let allowed = load_settings(pool).await?.reclaim.extensions_allowed as i64;
    Ok(rows.into_iter().map(|r| ReclaimStatus { extensions_allowed: allowed, ..r }).collect())
}

/// One machine's standing, for its page; another group's is "not found".
pub async fn status(pool: &Pool, viewer: &User, machine_id: i64) -> Result<ReclaimStatus, PlatformError> {
    let (cond, bind) = visibility(viewer, "m.group_id");
    let allowed = load_settings(pool).await?.reclaim.extensions_allowed as i64;
    let row: Option<ReclaimStatus> = sqlx::query_as(&format!(
        "SELECT {STATUS_COLUMNS}, (m.reclaim_exempt OR g.reclaim_exempt) AS exempt
         FROM machines m JOIN groups g ON g.id = m.group_id WHERE m.id = ? AND ({cond})"
    ))
    .bind(machine_id)
    .bind(bind)
    .fetch_optional(pool)
    .await?;
    let status = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    Ok(ReclaimStatus { extensions_allowed: allowed, ..status })
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

pub use crate::transitions::reclaim::{restore, start, stop};
