//! Server functions of the GPU charts and the cluster overview. Range and
//! period arrive as text ("1h", "24h", "7d"; "24h", "7d", "30d") and
//! unknown values are refused.

use crate::error::AppError;
use gantry_core::telemetry::view::{ChartData, Overview};
use leptos::prelude::*;

fn range_of(range: &str) -> Result<gantry_core::telemetry::ChartRange, AppError> {
    gantry_core::telemetry::ChartRange::parse(range)
        .ok_or_else(|| AppError::Invalid(format!("unknown chart range \"{range}\" (1h, 24h or 7d)")).respond())
}

/// A machine's GPUs: whoever may see the machine may see its chart.
#[server(prefix = "/api", endpoint = "machine_chart")]
pub async fn machine_chart(id: i64, range: String) -> Result<ChartData, AppError> {
    use gantry_platform::telemetry::{self, query};
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    let range = range_of(&range)?;
    gantry_platform::machines::machine_detail(&pool, &user, id).await?;
    Ok(query::chart(&pool, query::Scope::Machine(id), range, telemetry::now_ms()).await?)
}

/// Every GPU of a node (admins), with the node's name.
#[server(prefix = "/api", endpoint = "admin/node_chart")]
pub async fn node_chart(node_id: i64, range: String) -> Result<(String, ChartData), AppError> {
    use gantry_platform::telemetry::{self, query};
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    let range = range_of(&range)?;
    let name = gantry_platform::cluster::node_name(&pool, node_id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("node #{node_id} not found")).respond())?;
    Ok((name, query::chart(&pool, query::Scope::Node(node_id), range, telemetry::now_ms()).await?))
}

/// The heatmap and held-vs-used GPU-hours over `period` (admins).
#[server(prefix = "/api", endpoint = "admin/cluster_overview")]
pub async fn cluster_overview(period: String) -> Result<Overview, AppError> {
    use gantry_platform::telemetry::{self, overview};
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    let period_ms = gantry_core::telemetry::usage_period_ms(&period)
        .ok_or_else(|| AppError::Invalid(format!("unknown period \"{period}\" (24h, 7d or 30d)")).respond())?;
    Ok(Overview {
        cells: overview::heatmap(&pool, telemetry::now_ms()).await?,
        usage: overview::held_vs_used(&pool, period_ms, telemetry::now_ms()).await?,
        period,
    })
}

/// Sets the simulated pattern of a machine's GPUs; "default" clears it
/// (admins; audited).
#[server(prefix = "/api", endpoint = "admin/set_sim_pattern")]
pub async fn set_sim_pattern(machine_id: i64, pattern: String) -> Result<(), AppError> {
    let admin = crate::state::require_admin()?;
    let pattern = match pattern.trim() {
        "default" | "" => None,
        p => Some(p.to_string()),
    };
    gantry_platform::telemetry::overview::set_sim_pattern(
        &crate::state::pool()?,
        admin.id,
        machine_id,
        pattern.as_deref(),
    )
    .await
    .map_err(|e| AppError::from(e).respond())
}

/// The machine's simulated pattern as set ("default" when unset), for the
/// admin's control.
#[server(prefix = "/api", endpoint = "admin/sim_pattern")]
pub async fn sim_pattern(machine_id: i64) -> Result<String, AppError> {
    crate::state::require_admin()?;
    let pattern = gantry_platform::telemetry::overview::sim_pattern(&crate::state::pool()?, machine_id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("machine #{machine_id} not found")).respond())?;
    Ok(pattern.unwrap_or_else(|| "default".into()))
}
