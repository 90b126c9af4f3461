//! Worker nodes and their GPUs in the database, and the cluster snapshot
//! the scheduling core decides from.

use crate::{audit, db::Pool, gpus::DiscoveredGpu, now, PlatformError};
use gantry_core::alloc::{ClusterView, GpuView, NodeState, NodeView};
use serde::{Deserialize, Serialize};
use sqlx::SqliteConnection;
use std::collections::HashMap;

/// A node that has not sent a heartbeat for this long takes no new machines.
pub const HEARTBEAT_TIMEOUT_SECS: i64 = 60;

pub struct NodeRegistration<'a> {
    pub name: &'a str,
    pub region_code: &'a str,
    /// Explicit: unix:///path, tcp://host:port, tls://host:port, or
    /// simulated://NAME.
    pub docker_endpoint: &'a str,
    /// Loop-volume images directory on that host; "" for plain volumes.
    pub volume_dir: &'a str,
    /// "docker" or "simulated".
    pub executor: &'a str,
    pub cpu_count: i64,
    pub memory_mb: i64,
    pub gpus: &'a [DiscoveredGpu],
}

/// Creates or refreshes a node and its GPU list, and marks it alive. GPUs
/// are matched by UUID; those that disappeared are removed unless a machine
/// still holds them, which are marked gone instead (see [`sync_gpus`]).
pub async fn register_node(pool: &Pool, reg: NodeRegistration<'_>) -> Result<i64, PlatformError> {
    register_node_as(pool, reg, None, None).await
}

/// [`register_node`], also setting the node's CPU architecture and
/// auditing the admin who added it (actor, detail) — in the same commit:
/// a request cut off in between must not leave an arm64 node recorded as
/// amd64 (adding it again is refused: the name exists).
pub async fn register_node_as(
    pool: &Pool,
    reg: NodeRegistration<'_>,
    arch: Option<gantry_core::matching::Arch>,
    added_by: Option<(i64, &str)>,
) -> Result<i64, PlatformError> {
    if reg.docker_endpoint.trim().is_empty() {
        return Err(PlatformError::BadRequest(format!("node {} needs an explicit engine endpoint", reg.name)));
    }
    let mut tx = crate::transitions::begin(pool).await?;
    if added_by.is_some() {
        // An admin's add is a new node: checked under the write lock, so
        // two adds at once (a double submit, two servers) cannot both pass
        // and the second overwrite the first through the upsert below.
        let exists: Option<i64> =
            sqlx::query_scalar("SELECT id FROM nodes WHERE name = ?").bind(reg.name).fetch_optional(&mut *tx).await?;
        if exists.is_some() {
            return Err(PlatformError::Conflict(format!("a node named {} exists already", reg.name)));
        }
        let twin: Option<String> =
            sqlx::query_scalar(crate::nodes::TWIN).bind(reg.docker_endpoint).fetch_optional(&mut *tx).await?;
        if let Some(twin) = twin {
            return Err(PlatformError::Conflict(format!(
                "node {twin} already has the engine at {}",
                reg.docker_endpoint
            )));
        }
    }
    let region: Option<(i64,)> =
        sqlx::query_as("SELECT id FROM regions WHERE code = ?").bind(reg.region_code).fetch_optional(&mut *tx).await?;
    let region_id = region.ok_or_else(|| PlatformError::NotFound(format!("region {}", reg.region_code)))?.0;
    let now = now();
    let (node_id,): (i64,) = sqlx::query_as(
        "INSERT INTO nodes (name, region_id, docker_endpoint, volume_dir, executor, state, last_heartbeat, cpu_count, memory_mb, created_at)
         VALUES (?, ?, ?, ?, ?, 'ready', ?, ?, ?, ?)
         ON CONFLICT(name) DO UPDATE SET docker_endpoint = excluded.docker_endpoint, volume_dir = excluded.volume_dir, executor = excluded.executor,
             last_heartbeat = excluded.last_heartbeat, cpu_count = excluded.cpu_count, memory_mb = excluded.memory_mb
         RETURNING id",
    )
    .bind(reg.name)
    .bind(region_id)
    .bind(reg.docker_endpoint)
    .bind(reg.volume_dir)
    .bind(reg.executor)
    .bind(now)
    .bind(reg.cpu_count)
    .bind(reg.memory_mb)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    sync_gpus(&mut tx, node_id, reg.gpus).await?;
    if let Some(arch) = arch {
        sqlx::query("UPDATE nodes SET arch = ? WHERE id = ?")
            .bind(arch.as_str())
            .bind(node_id)
            .execute(&mut *tx)
            .await?;
    }
    audit::record(
        &mut *tx,
        None,
        "node.register",
        &format!("node {} with {} GPU(s), executor {}", reg.name, reg.gpus.len(), reg.executor),
    )
    .await?;
    if let Some((actor, detail)) = added_by {
        audit::record(&mut *tx, Some(actor), "node.add", detail).await?;
    }
    tx.commit().await?;
    Ok(node_id)
}

/// One of the node's GPU rows as registration finds it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
struct GpuRow {
    id: i64,
    idx: i64,
    uuid: String,
    held: bool,
}

/// What registration does to a node's GPU rows.
#[derive(Debug, Default, PartialEq, Eq)]
struct GpuPlan {
    /// Rows still reported: (row id, position in the reported list). The
    /// row id is what `machine_gpus` refers to, so it must not change.
    update: Vec<(i64, usize)>,
    /// Reported GPUs with no row yet (positions in the reported list).
    insert: Vec<usize>,
    /// Free GPUs no longer reported.
    delete: Vec<i64>,
    /// Held GPUs no longer reported, kept for their machine and marked
    /// gone: (row id, idx), at an index no reported GPU uses (the index is
    /// unique per node).
    keep_held: Vec<(i64, i64)>,
}

/// Matches rows to reported GPUs by UUID. NVML's order is not stable
/// across reboots and a GPU that drops off the bus shifts the ones after
/// it, so a position says nothing about which card it is.
fn plan_gpus(rows: &[GpuRow], reported: &[DiscoveredGpu]) -> GpuPlan {
    let by_uuid: HashMap<&str, &GpuRow> = rows.iter().map(|r| (r.uuid.as_str(), r)).collect();
    let mut plan = GpuPlan::default();
    for (pos, g) in reported.iter().enumerate() {
        match by_uuid.get(g.uuid.as_str()) {
            Some(row) => plan.update.push((row.id, pos)),
            None => plan.insert.push(pos),
        }
    }
    let mut used: std::collections::HashSet<i64> = reported.iter().map(|g| g.index as i64).collect();
    let mut next = rows.iter().map(|r| r.idx).chain(used.iter().copied()).max().unwrap_or(-1) + 1;
    let mut gone: Vec<&GpuRow> = rows.iter().filter(|r| !reported.iter().any(|g| g.uuid == r.uuid)).collect();
    gone.sort_by_key(|r| r.idx);
    for row in gone {
        if !row.held {
            plan.delete.push(row.id);
            continue;
        }
        let idx = if used.contains(&row.idx) { next } else { row.idx };
        next = next.max(idx + 1);
        used.insert(idx);
        plan.keep_held.push((row.id, idx));
    }
    plan
}

/// Brings the node's GPU rows to the reported list (see [`plan_gpus`]). A
/// held GPU no longer reported keeps its row, listed in `gpus_gone`:
/// nothing offers it, and its machine's release deletes it
/// (`transitions::machine::release`). Reported again (a card reseated)
/// before that, it is an ordinary GPU again.
async fn sync_gpus(conn: &mut SqliteConnection, node_id: i64, reported: &[DiscoveredGpu]) -> Result<(), PlatformError> {
    let rows: Vec<GpuRow> = sqlx::query_as(
        "SELECT g.id, g.idx, g.uuid, EXISTS (SELECT 1 FROM machine_gpus mg WHERE mg.gpu_id = g.id) AS held FROM gpus g WHERE g.node_id = ?",
    )
    .bind(node_id)
    .fetch_all(&mut *conn)
    .await?;
    let plan = plan_gpus(&rows, reported);
    for id in &plan.delete {
        sqlx::query("DELETE FROM gpus WHERE id = ?").bind(id).execute(&mut *conn).await?;
    }
    // Indexes may swap between rows; park every row on an index of its
    // own (negative: NVML never reports one) so no step trips over
    // UNIQUE (node_id, idx) halfway.
    sqlx::query("UPDATE gpus SET idx = -1 - id WHERE node_id = ?").bind(node_id).execute(&mut *conn).await?;
    for (id, pos) in &plan.update {
        let g = &reported[*pos];
        sqlx::query("UPDATE gpus SET idx = ?, model = ?, memory_mb = ?, simulated = ? WHERE id = ?")
            .bind(g.index as i64)
            .bind(&g.model)
            .bind(g.memory_mb)
            .bind(g.simulated)
            .bind(id)
            .execute(&mut *conn)
            .await?;
        sqlx::query("DELETE FROM gpus_gone WHERE gpu_id = ?").bind(id).execute(&mut *conn).await?;
    }
    for (id, idx) in &plan.keep_held {
        tracing::warn!(
            node_id,
            gpu_id = id,
            idx,
            "a GPU a machine holds is no longer reported; kept until the machine lets it go"
        );
        sqlx::query("UPDATE gpus SET idx = ? WHERE id = ?").bind(idx).bind(id).execute(&mut *conn).await?;
        // The first time it was missed stays: how long it has been gone.
        sqlx::query("INSERT OR IGNORE INTO gpus_gone (gpu_id, since) VALUES (?, ?)")
            .bind(id)
            .bind(now())
            .execute(&mut *conn)
            .await?;
    }
    for pos in &plan.insert {
        let g = &reported[*pos];
        refuse_if_elsewhere(conn, &g.uuid).await?;
        sqlx::query("INSERT INTO gpus (node_id, idx, uuid, model, memory_mb, simulated) VALUES (?, ?, ?, ?, ?, ?)")
            .bind(node_id)
            .bind(g.index as i64)
            .bind(&g.uuid)
            .bind(&g.model)
            .bind(g.memory_mb)
            .bind(g.simulated)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// A GPU belongs to one node (`gpus.uuid` is unique). A card another node
/// row still lists — moved to this host, or this host registered again
/// under a new name — is refused by name, with the way out: that node's
/// machines and GPU history stay as they are until an admin removes it.
async fn refuse_if_elsewhere(conn: &mut SqliteConnection, uuid: &str) -> Result<(), PlatformError> {
    let holder: Option<(String, String)> =
        sqlx::query_as("SELECT n.name, n.state FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE g.uuid = ?")
            .bind(uuid)
            .fetch_optional(&mut *conn)
            .await?;
    match holder {
        None => Ok(()),
        Some((node, state)) => Err(PlatformError::Conflict(format!(
            "GPU {uuid} is registered to node {node} ({state}); a GPU belongs to one node: remove node {node} first \
             (delete its machines, or mark it lost if it is gone), then try again"
        ))),
    }
}

/// amd64 or arm64: which region images the node can run.
pub async fn set_node_arch(pool: &Pool, node_id: i64, arch: gantry_core::matching::Arch) -> Result<(), PlatformError> {
    sqlx::query("UPDATE nodes SET arch = ? WHERE id = ?").bind(arch.as_str()).bind(node_id).execute(pool).await?;
    Ok(())
}

/// This host's architecture, as region images name it.
pub fn host_arch() -> gantry_core::matching::Arch {
    match std::env::consts::ARCH {
        "aarch64" => gantry_core::matching::Arch::Arm64,
        _ => gantry_core::matching::Arch::Amd64,
    }
}

/// A node's name by its id; `None`: no such node.
pub async fn node_name(pool: &Pool, node_id: i64) -> Result<Option<String>, PlatformError> {
    Ok(sqlx::query_scalar("SELECT name FROM nodes WHERE id = ?").bind(node_id).fetch_optional(pool).await?)
}

/// How a node's row was left by the previous run: its executor and last
/// heartbeat; `None`: no node of that name.
pub async fn node_executor_and_heartbeat(pool: &Pool, name: &str) -> Result<Option<(String, i64)>, PlatformError> {
    Ok(sqlx::query_as("SELECT executor, last_heartbeat FROM nodes WHERE name = ?")
        .bind(name)
        .fetch_optional(pool)
        .await?)
}

pub async fn heartbeat(pool: &Pool, node_id: i64) -> Result<(), PlatformError> {
    set_heartbeat(pool, node_id, now()).await
}

/// Puts back the heartbeat a node had before [`register_node`] refreshed
/// it, when its engine did not answer at registration.
pub async fn set_heartbeat(pool: &Pool, node_id: i64, at: i64) -> Result<(), PlatformError> {
    sqlx::query("UPDATE nodes SET last_heartbeat = ? WHERE id = ?").bind(at).bind(node_id).execute(pool).await?;
    Ok(())
}

/// The whole cluster as the scheduling core sees it, read inside the
/// caller's transaction so the decision and its writes see the same state.
/// A GPU its node no longer reports is not there: only its holder keeps it.
/// One a closed machine's container may still be pinned to (left to the
/// collector, see `transitions::machine::release_as`) is taken.
pub async fn load_view(conn: &mut SqliteConnection) -> Result<ClusterView, PlatformError> {
    let nodes: Vec<(i64, String, String, i64)> =
        sqlx::query_as("SELECT id, name, state, last_heartbeat FROM nodes ORDER BY id").fetch_all(&mut *conn).await?;
    let gpus: Vec<(i64, i64, String, String, bool)> = sqlx::query_as(
        "SELECT g.node_id, g.idx, g.uuid, g.model, mg.gpu_id IS NOT NULL OR g.id IN (SELECT gpu_id FROM gpus_left_to_collector)
         FROM gpus g LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id WHERE g.id NOT IN (SELECT gpu_id FROM gpus_gone) ORDER BY g.node_id, g.idx",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut by_node: HashMap<i64, Vec<GpuView>> = HashMap::new();
    for (node_id, idx, uuid, model, taken) in gpus {
        by_node.entry(node_id).or_default().push(GpuView { index: idx as u32, uuid, model, taken });
    }
    let nodes = nodes
        .into_iter()
        .map(|(id, name, state, last_heartbeat)| NodeView {
            gpus: by_node.remove(&id).unwrap_or_default(),
            id,
            name,
            // An unreadable state must never make a node schedulable.
            state: state.parse().unwrap_or(NodeState::Down),
            last_heartbeat,
        })
        .collect();
    Ok(ClusterView { nodes, heartbeat_timeout_secs: HEARTBEAT_TIMEOUT_SECS })
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct NodeSummary {
    pub id: i64,
    pub name: String,
    pub region: String,
    pub executor: String,
    pub docker_endpoint: String,
    #[sqlx(try_from = "String")]
    pub state: NodeState,
    /// Why the node is in its state, in the admin's words; may be empty.
    pub state_reason: String,
    #[sqlx(try_from = "String")]
    pub arch: gantry_core::matching::Arch,
    /// Unix seconds; 0 = never.
    pub last_heartbeat: i64,
    /// Whether the last heartbeat is recent enough to take new machines
    /// (within [`HEARTBEAT_TIMEOUT_SECS`] of the read).
    pub heartbeat_fresh: bool,
    pub cpu_count: i64,
    pub memory_mb: i64,
    /// GPUs the node reports; a held GPU it no longer reports is in
    /// `gpu_gone` only.
    pub gpu_total: i64,
    pub gpu_free: i64,
    pub gpu_gone: i64,
    /// The models of its GPUs (stored as the database's GROUP_CONCAT).
    #[sqlx(try_from = "String")]
    pub gpu_models: GpuModels,
    pub simulated: bool,
    /// Machines with a volume on the node whose size is not enforced: a
    /// plain Docker volume, because loop-device volumes were unavailable
    /// there when it was made (the node's log says why).
    pub unenforced_volumes: i64,
    /// Free and total bytes of the disk holding its engine's data, as the
    /// node monitor last measured them; `None`: unknown (a remote engine).
    pub disk_free_bytes: Option<i64>,
    pub disk_total_bytes: Option<i64>,
}

/// GPU model names, each once; serialized as a JSON array.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GpuModels(pub Vec<String>);

impl GpuModels {
    /// "A100, H100" (a comma-separated list) to its names; blanks dropped.
    pub fn parse(list: &str) -> GpuModels {
        GpuModels(list.split(',').map(str::trim).filter(|m| !m.is_empty()).map(str::to_string).collect())
    }
}

impl std::ops::Deref for GpuModels {
    type Target = [String];

    fn deref(&self) -> &[String] {
        &self.0
    }
}

/// For `#[sqlx(try_from = "String")]` (through `TryFrom`'s blanket impl).
impl From<String> for GpuModels {
    fn from(list: String) -> Self {
        GpuModels::parse(&list)
    }
}

pub async fn list_nodes(pool: &Pool) -> Result<Vec<NodeSummary>, PlatformError> {
    Ok(sqlx::query_as(
        "SELECT n.id, n.name, r.code AS region, n.executor, n.docker_endpoint, n.state, n.state_reason, n.arch, n.last_heartbeat,
                (n.last_heartbeat > 0 AND ?1 - n.last_heartbeat <= ?2) AS heartbeat_fresh, n.cpu_count, n.memory_mb,
                COUNT(g.id) - COUNT(x.gpu_id) AS gpu_total,
                -- A node without GPUs still joins one all-NULL row: not a free GPU.
                COALESCE(SUM(g.id IS NOT NULL AND x.gpu_id IS NULL AND mg.gpu_id IS NULL
                             AND g.id NOT IN (SELECT gpu_id FROM gpus_left_to_collector)), 0) AS gpu_free,
                COUNT(x.gpu_id) AS gpu_gone,
                COALESCE(GROUP_CONCAT(DISTINCT g.model), '') AS gpu_models,
                COALESCE(MAX(g.simulated), 0) AS simulated,
                (SELECT COUNT(*) FROM machines m WHERE m.node_id = n.id AND m.volume_enforced = 0
                   AND m.state IN ('running', 'stopped', 'restarting', 'reinstalling')) AS unenforced_volumes,
                n.disk_free_bytes, n.disk_total_bytes
         FROM nodes n JOIN regions r ON r.id = n.region_id
         LEFT JOIN gpus g ON g.node_id = n.id LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id LEFT JOIN gpus_gone x ON x.gpu_id = g.id
         GROUP BY n.id ORDER BY n.name",
    )
    .bind(now())
    .bind(HEARTBEAT_TIMEOUT_SECS)
    .fetch_all(pool)
    .await?)
}

/// GPU models present in the cluster, for the create form.
pub async fn gpu_models(pool: &Pool) -> Result<Vec<String>, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT DISTINCT model FROM gpus WHERE id NOT IN (SELECT gpu_id FROM gpus_gone) ORDER BY model",
    )
    .fetch_all(pool)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_models_split_the_concatenated_list() {
        assert_eq!(GpuModels::parse("A100, H100,,"), GpuModels(vec!["A100".into(), "H100".into()]));
        assert_eq!(GpuModels::parse(""), GpuModels::default());
        assert_eq!(serde_json::to_string(&GpuModels::parse("L40S")).unwrap(), r#"["L40S"]"#);
    }

    fn row(id: i64, idx: i64, uuid: &str, held: bool) -> GpuRow {
        GpuRow { id, idx, uuid: uuid.into(), held }
    }

    fn reported(uuids: &[&str]) -> Vec<DiscoveredGpu> {
        let gpu = |(i, u): (usize, &&str)| DiscoveredGpu {
            index: i as u32,
            uuid: u.to_string(),
            model: "M".into(),
            memory_mb: 1,
            simulated: false,
        };
        uuids.iter().enumerate().map(gpu).collect()
    }

    #[test]
    fn rows_follow_their_uuid_not_their_position() {
        let rows = [row(10, 0, "A", false), row(11, 1, "B", false), row(12, 2, "C", true)];
        let plan = plan_gpus(&rows, &reported(&["C", "A", "N"]));
        assert_eq!(
            plan,
            GpuPlan { update: vec![(12, 0), (10, 1)], insert: vec![2], delete: vec![11], keep_held: vec![] }
        );
    }

    #[test]
    fn a_held_gpu_that_is_gone_moves_off_an_index_a_present_gpu_takes() {
        // B (held) is gone and a replacement card N now sits at its index 1.
        let rows = [row(10, 0, "A", false), row(11, 1, "B", true), row(12, 2, "C", false)];
        let plan = plan_gpus(&rows, &reported(&["A", "N", "C"]));
        assert_eq!(plan.keep_held, vec![(11, 3)]);
        assert!(plan.delete.is_empty());
        // Nothing collides: it keeps its index.
        let plan = plan_gpus(&rows, &reported(&["A"]));
        assert_eq!((plan.keep_held, plan.delete), (vec![(11, 1)], vec![12]));
    }
}
