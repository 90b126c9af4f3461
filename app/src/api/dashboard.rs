//! What the portal's front page shows.

use crate::error::AppError;
use gantry_platform::{
    accounts::QuotaView,
    compute::ComputeTaskView,
    machines::{MachineView, TaskView},
};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// Rows of each list the dashboard shows (the full lists are a link away).
pub const DASH_ROWS: i64 = 5;

/// The front page's data: the group's quota, what to do next, and the
/// signed-in user's own newest machines (with their GPUs' current use),
/// tasks and compute tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardView {
    pub quota: QuotaView,
    pub next: NextSteps,
    pub machines: Vec<DashMachine>,
    /// How many machines the user has in all (not deleted).
    pub machines_total: i64,
    pub tasks: Vec<TaskView>,
    pub compute: Vec<ComputeTaskView>,
}

/// One of the user's machines, with the mean current utilisation of its
/// GPUs in whole percent (`None`: no fresh reading, or not running).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashMachine {
    pub machine: MachineView,
    pub gpu_use_pct: Option<i64>,
}

/// What the dashboard tells someone whose portal cannot create a machine
/// yet: their group has no quota, or no node is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextSteps {
    pub group: String,
    pub group_has_quota: bool,
    pub ready_nodes: i64,
}

/// The signed-in user's group and its GPU quota.
#[server(prefix = "/api", endpoint = "my_quota")]
pub async fn my_quota() -> Result<QuotaView, AppError> {
    // The request's user was read with its group's quota, this request.
    Ok(crate::state::auth()?.quota())
}

/// The front page's data in one answer: the group's quota, whether the
/// signed-in user can create a machine right now (and if not, why: no
/// quota in their group, no ready node), and their own newest machines,
/// tasks and compute tasks ([`DASH_ROWS`] of each, through the lists' own
/// windowed queries, owner = the user) with the machines' current GPU use
/// (one query over the latest readings). One resource rather than several:
/// one fetch and one Suspense boundary for the whole page.
#[server(prefix = "/api", endpoint = "dashboard")]
pub async fn dashboard() -> Result<DashboardView, AppError> {
    use gantry_core::{paging::PageRequest, task::MachineState};
    use gantry_platform::{compute, machines, telemetry};
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    // The request's user was read with its group's quota, this request.
    let quota = user.quota();
    let ready_nodes = gantry_platform::first_run::ready_nodes(&pool).await?;
    let next = NextSteps { group: quota.group.clone(), group_has_quota: quota.gpu_quota > 0, ready_nodes };
    let mine = machines::ListFilter { user: Some(user.username.clone()), ..Default::default() };
    let first = PageRequest { page: 1, per_page: DASH_ROWS };
    let window = machines::machines_window(&pool, &user, &mine, first).await?;
    let running: Vec<i64> = window.rows.iter().filter(|m| m.state == MachineState::Running).map(|m| m.id).collect();
    let util = telemetry::overview::machines_util_now(&pool, &running, telemetry::now_ms()).await?;
    let machines = window
        .rows
        .into_iter()
        .map(|machine| {
            let gpu_use_pct = util.iter().find(|(id, _)| *id == machine.id).map(|(_, u)| u.round() as i64);
            DashMachine { machine, gpu_use_pct }
        })
        .collect();
    let tasks = machines::tasks_window(&pool, &user, &mine, first).await?.rows;
    let compute = compute::compute_window(&pool, &user, &mine, first).await?.rows;
    Ok(DashboardView { quota, next, machines, machines_total: window.total, tasks, compute })
}
