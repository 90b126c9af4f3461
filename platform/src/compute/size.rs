//! The cluster's size as built (not what is free now), read for the pure
//! rules in `gantry_core::matching::size`: a GPU model no GPU has is
//! refused at submit, and a task no node of the regions its group may use
//! could ever hold fails rather than block its group's queue for ever.

use super::rules::{Ask, ImagePlace};
use crate::{accounts::User, PlatformError};
use gantry_core::matching::{never_fits, unknown_model, Need, NodeSize};
use sqlx::SqliteConnection;
use std::collections::{BTreeMap, BTreeSet};

/// Why `model` is no GPU's model, with the models the cluster has; `None`
/// when a GPU of a node not lost has it (or there is no GPU yet). A GPU
/// its node no longer reports (`gpus_gone`) counts: its row is kept only
/// while a machine holds it, and it may be reported again (a reseated
/// card); once let go for good, its row is gone too.
pub(super) async fn model_unknown(conn: &mut SqliteConnection, model: &str) -> Result<Option<String>, PlatformError> {
    let models: BTreeSet<String> = sqlx::query_scalar(
        "SELECT DISTINCT g.model FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.state <> 'lost'",
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .collect();
    Ok(unknown_model(model, &models))
}

/// Why no node in the regions `requester`'s group may use could ever hold
/// the task, even idle; `None` when one could (it only has to wait), or
/// when there is no node there at all. Nodes down or draining count: they
/// may come back; lost ones do not. So do GPUs their node no longer
/// reports (`gpus_gone`), for the same reason (see [`model_unknown`]);
/// they are never offered while gone (the matcher's snapshot, admission).
/// Only nodes that could run one of the task's `images` (region id, code,
/// architecture; see `rules::image_places`) count, as the matcher places a
/// task only where a node with room has an image of its architecture: a
/// big node in a region without the image, or of another architecture,
/// would otherwise keep the task waiting for ever.
pub(super) async fn no_node_can_hold(
    conn: &mut SqliteConnection,
    requester: &User,
    ask: &Ask,
    images: &[ImagePlace],
) -> Result<Option<String>, PlatformError> {
    let allowed = crate::policy_access::allowed_regions(conn, requester.group_id).await?;
    let allowed_models: Vec<String> =
        sqlx::query_scalar("SELECT model FROM group_gpu_models WHERE group_id = ? ORDER BY model")
            .bind(requester.group_id)
            .fetch_all(&mut *conn)
            .await?;
    let nodes: Vec<(i64, String, i64, i64, i64, String)> = sqlx::query_as(
        "SELECT id, name, cpu_count, memory_mb, region_id, arch FROM nodes WHERE state <> 'lost' ORDER BY name, id",
    )
    .fetch_all(&mut *conn)
    .await?;
    let gpus: Vec<(i64, String, i64)> = sqlx::query_as(
        "SELECT g.node_id, g.model, COUNT(*) FROM gpus g JOIN nodes n ON n.id = g.node_id
         WHERE n.state <> 'lost' GROUP BY g.node_id, g.model",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut by_node: BTreeMap<i64, BTreeMap<String, u32>> = BTreeMap::new();
    for (node, model, count) in gpus {
        by_node.entry(node).or_default().insert(model, count as u32);
    }
    let may_use = |region: i64| allowed.is_empty() || allowed.iter().any(|(r, _)| *r == region);
    let usable: Vec<_> = nodes.into_iter().filter(|n| may_use(n.4)).collect();
    // No image at all is refused at submit; one deleted since only waits.
    let runs_image = |n: &(i64, String, i64, i64, i64, String)| {
        images.is_empty() || images.iter().any(|(r, _, a)| *r == n.4 && *a == n.5)
    };
    let runnable: Vec<_> = usable.iter().filter(|n| runs_image(n)).cloned().collect();
    let where_images = || {
        images
            .iter()
            .filter(|(r, ..)| may_use(*r))
            .map(|(_, code, arch)| format!("{code} ({arch})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut place = match allowed.len() {
        0 => "in any region".to_string(),
        _ => format!(
            "in the region(s) group {} may use ({})",
            requester.group_name,
            allowed.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>().join(", ")
        ),
    };
    if runnable.is_empty() && !usable.is_empty() {
        return Ok(Some(format!(
            "no node {place} can run an image for it: its images are in {}, and no node of that architecture is in those regions",
            where_images()
        )));
    }
    if runnable.len() < usable.len() {
        place = format!("in a region with an image for it ({})", where_images());
    }
    let sizes: Vec<NodeSize> = runnable
        .into_iter()
        .map(|(id, name, cpus, memory_mb, ..)| NodeSize {
            name,
            gpus: by_node.remove(&id).unwrap_or_default(),
            cpu_millis: cpus * 1000,
            memory_mb,
        })
        .collect();
    let need =
        Need { gpus: ask.gpus, gpu_model: ask.gpu_model.clone(), cpu_millis: ask.cpu_millis, memory_mb: ask.memory_mb };
    Ok(never_fits(&sizes, &need, &allowed_models, &place))
}
