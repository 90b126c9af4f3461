//! Why a start (or restore) with no room on its own node is not moved to
//! another node of its region. A machine's data volume is a loop-device
//! image (or a Docker volume) in its node's volume directory, and its
//! restore point is an image in that node's Docker engine: both are
//! node-local, and nothing in Gantry copies them between nodes. So the
//! machine can only start where it is; this says so with the numbers, and
//! names a node of the region that would have had room, so the user knows
//! waiting (or a queued start) is the way, not another region.

use crate::PlatformError;
use gantry_core::alloc::{allocate, AllocationRequest, ClusterView, GroupPolicy};
use sqlx::SqliteConnection;

/// The refusal of a start that found too few free GPUs on node `node_id`
/// (`full`: every node, as admission read it).
pub(super) async fn no_room(
    conn: &mut SqliteConnection,
    node_id: i64,
    full: &ClusterView,
    policy: &GroupPolicy,
    request: &AllocationRequest,
) -> Result<String, PlatformError> {
    let name = full.nodes.iter().find(|n| n.id == node_id).map(|n| n.name.clone()).unwrap_or_default();
    let free = full
        .nodes
        .iter()
        .filter(|n| n.id == node_id)
        .flat_map(|n| n.gpus.iter())
        .filter(|g| !g.taken && request.model.as_ref().is_none_or(|m| *m == g.model))
        .count();
    let model = request.model.clone().unwrap_or_else(|| "GPU".into());
    let mut why = format!(
        "its volume and snapshot live on node {name} and cannot move (they are node-local); node {name} has {free} free {model} GPU(s), it needs {}",
        request.gpu_count
    );
    // Other nodes of the same region: would one of them have had room?
    let same_region: Vec<i64> = sqlx::query_scalar(
        "SELECT o.id FROM nodes o JOIN nodes n ON n.id = ? WHERE o.region_id IS n.region_id AND o.id <> n.id",
    )
    .bind(node_id)
    .fetch_all(&mut *conn)
    .await?;
    let others = ClusterView {
        nodes: full.nodes.iter().filter(|n| same_region.contains(&n.id)).cloned().collect(),
        ..full.clone()
    };
    if let Ok(there) = allocate(&others, policy, request, crate::now()) {
        why.push_str(&format!(
            "; node {} of its region has room, but the machine cannot follow there without its volume",
            there.node_name
        ));
    }
    Ok(why)
}
