//! Room on a node for a machine's CPU and memory. A node declares its CPU
//! count and memory when it registers; 0 means "not declared", and such a
//! node is never counted out.
//!
//! Nodes are first narrowed to the regions the machine's group may use
//! (`in_regions`). Then two rules: every machine must fit the node's size
//! (the engine refuses a CPU limit above the host's CPU count, and would
//! only say so after the GPUs were taken), and a compute task's machine goes only where the
//! machines already there leave room for its CPU and memory (as the
//! matcher counted them). Dev machines' limits are caps the engine shares
//! out, not reservations, so they are held to the first rule only.

use super::admission::Job;
use crate::{executor::Limits, PlatformError};
use sqlx::SqliteConnection;

/// A node's declared CPU count (0: not declared).
#[derive(Debug, Clone)]
pub(crate) struct NodeCpus {
    pub id: i64,
    pub name: String,
    pub cpus: i64,
}

/// Every node's declared CPU count, by name.
pub(crate) async fn node_cpus(conn: &mut SqliteConnection) -> Result<Vec<NodeCpus>, PlatformError> {
    let rows: Vec<(i64, String, i64)> =
        sqlx::query_as("SELECT id, name, cpu_count FROM nodes ORDER BY name").fetch_all(&mut *conn).await?;
    Ok(rows.into_iter().map(|(id, name, cpus)| NodeCpus { id, name, cpus }).collect())
}

/// Whether a machine with `limits` fits a node of `cpus` CPUs (0: unknown).
fn fits(cpus: i64, limits: &Limits) -> bool {
    cpus == 0 || cpus * 1000 >= limits.cpu_millis
}

/// Narrows the nodes a machine may go to (`None`: any) to those whose size
/// fits it. Returns the narrowed set and the nodes it left out for their
/// size (empty: nothing left out, the set is as given).
pub(crate) fn fitting<'a>(
    nodes: &'a [NodeCpus],
    only: Option<Vec<i64>>,
    limits: &Limits,
) -> (Option<Vec<i64>>, Vec<&'a NodeCpus>) {
    let out: Vec<&NodeCpus> =
        nodes.iter().filter(|n| !fits(n.cpus, limits) && only.as_ref().is_none_or(|ids| ids.contains(&n.id))).collect();
    if out.is_empty() {
        return (only, out);
    }
    let ids = only.unwrap_or_else(|| nodes.iter().map(|n| n.id).collect());
    (Some(ids.into_iter().filter(|id| !out.iter().any(|n| n.id == *id)).collect()), out)
}

/// Narrows the nodes a machine may go to (`None`: any) to those of the
/// regions its group may use (`allowed`: their nodes; `None`: the group may
/// use every region). `Err` names the rule when it leaves none of the
/// nodes there were; the flag tells whether it left any out.
pub(crate) async fn in_regions(
    conn: &mut SqliteConnection,
    group_id: i64,
    group_name: &str,
    nodes: &[NodeCpus],
    allowed: Option<&[i64]>,
    only: Option<Vec<i64>>,
) -> Result<Result<(Option<Vec<i64>>, bool), String>, PlatformError> {
    let Some(allowed) = allowed else { return Ok(Ok((only, false))) };
    let candidates = only.unwrap_or_else(|| nodes.iter().map(|n| n.id).collect());
    let kept: Vec<i64> = candidates.iter().copied().filter(|id| allowed.contains(id)).collect();
    if kept.is_empty() && !candidates.is_empty() {
        let why = crate::policy_access::refusal_for_nodes(conn, group_id, group_name, &candidates).await?;
        return Ok(Err(why.unwrap_or_else(|| {
            format!("group {group_name} may not use the regions of the nodes that could take this machine")
        })));
    }
    let narrowed = kept.len() < candidates.len();
    Ok(Ok((Some(kept), narrowed)))
}

/// Why the nodes left out could not take the machine, with the numbers.
pub(crate) fn too_small(out: &[&NodeCpus], limits: &Limits) -> String {
    let nodes: Vec<String> = out.iter().take(3).map(|n| format!("node {} has {} CPU(s)", n.name, n.cpus)).collect();
    let more = if out.len() > 3 { format!(" (and {} more)", out.len() - 3) } else { String::new() };
    format!("{}{more}; this machine asks for {}", nodes.join(", "), limits.cpu_millis as f64 / 1000.0)
}

/// One node's size against a machine's limits: `Err` with the numbers
/// when it cannot take it (create from a snapshot, restore).
pub(crate) async fn check_node(
    conn: &mut SqliteConnection,
    node_id: i64,
    limits: &Limits,
) -> Result<Result<(), String>, PlatformError> {
    let nodes = node_cpus(conn).await?;
    let (_, out) = fitting(&nodes, Some(vec![node_id]), limits);
    Ok(if out.is_empty() { Ok(()) } else { Err(too_small(&out, limits)) })
}

/// The nodes a compute task's machine may go to: its region's nodes of its
/// image's architecture with room for its CPU and memory, left by the
/// machines that may have a container there (as the matcher counts them:
/// `compute::has_container_sql`). Machines admitted earlier in the batch
/// are already written, so they count.
pub(crate) async fn job_nodes(
    conn: &mut SqliteConnection,
    job: &Job,
    limits: &Limits,
) -> Result<Vec<i64>, PlatformError> {
    Ok(sqlx::query_scalar(&format!(
        "SELECT n.id FROM nodes n WHERE n.region_id = ?1 AND n.arch = (SELECT arch FROM region_images WHERE id = ?2)
           AND (n.cpu_count = 0 OR (
                n.cpu_count * 1000 - COALESCE((SELECT SUM(m.cpu_millis) FROM machines m WHERE m.node_id = n.id AND {on_node}), 0) >= ?3
            AND n.memory_mb - COALESCE((SELECT SUM(m.memory_mb) FROM machines m WHERE m.node_id = n.id AND {on_node}), 0) >= ?4))",
        on_node = crate::compute::has_container_sql(),
    ))
    .bind(job.region_id)
    .bind(job.region_image_id)
    .bind(limits.cpu_millis)
    .bind(limits.memory_mb)
    .fetch_all(&mut *conn)
    .await?)
}
