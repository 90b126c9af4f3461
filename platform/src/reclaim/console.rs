//! What the admin's Reclaim page lists: every group's exemption, and one
//! page of the live dev machines (newest first) with their standing.

use crate::{db::Pool, PlatformError};
use gantry_core::{paging::PageRequest, task::MachineState};
use serde::{Deserialize, Serialize};

/// A group and whether it is exempt from idle reclaim.
pub type GroupExemption = (i64, String, bool);

/// A live dev machine's standing, as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct MachineStanding {
    pub id: i64,
    pub name: String,
    pub owner: String,
    #[sqlx(try_from = "String")]
    pub state: MachineState,
    /// Exempt from idle reclaim itself (its group's exemption is listed apart).
    pub exempt: bool,
    /// Its owner keeps it off hot-GPU rebalancing.
    pub rebalance_opt_out: bool,
    /// The current warning's reclaim deadline (unix s).
    pub deadline: Option<i64>,
}

/// One page of the console's lists, with how many machines there are in all.
pub struct Console {
    pub groups: Vec<GroupExemption>,
    pub machines: Vec<MachineStanding>,
    pub total_machines: i64,
}

/// Costs the same with 50 or 5,000 machines: one page is read, and the
/// count tables (migration 0014) say how many without reading them.
pub async fn console(pool: &Pool, page: PageRequest) -> Result<Console, PlatformError> {
    let groups = sqlx::query_as("SELECT id, name, reclaim_exempt FROM groups ORDER BY name").fetch_all(pool).await?;
    let machines = sqlx::query_as(
        "SELECT m.id, m.name, u.username AS owner, m.state, m.reclaim_exempt AS exempt, m.rebalance_opt_out, m.reclaim_deadline AS deadline
         FROM machines m JOIN users u ON u.id = m.owner_id
         WHERE m.state NOT IN ('deleted', 'lost') AND m.workload = 'dev' ORDER BY m.id DESC LIMIT ? OFFSET ?",
    )
    .bind(page.per_page)
    .bind(page.offset())
    .fetch_all(pool)
    .await?;
    let total_machines = sqlx::query_scalar(
        "SELECT COALESCE(SUM(n), 0) FROM machine_counts WHERE state NOT IN ('deleted', 'lost') AND workload = 'dev'",
    )
    .fetch_one(pool)
    .await?;
    Ok(Console { groups, machines, total_machines })
}
