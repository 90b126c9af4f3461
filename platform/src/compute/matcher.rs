//! The matcher: decides pending compute tasks against a snapshot of the
//! catalogue and the regions' free resources, records every decision with
//! the sets it came from, and admits a job machine in the chosen region.
//!
//! Queue order: first come, first served within a group — only the oldest
//! pending task of each group is considered, so a large request at the
//! head is never overtaken (and starved) by smaller ones behind it; groups
//! do not wait for each other.

use crate::{
    accounts,
    cluster::HEARTBEAT_TIMEOUT_SECS,
    db::Pool,
    machines::{Admissions, CreateMachine, Job},
    now, transitions, PlatformError,
};
use gantry_core::matching::{
    decide_for_group, Arch, MasterImage, NodeCapacity, Outcome, RegionCapacity, RegionImage, TaskRequest,
};
use gantry_core::{machine::may_have_container, task::MachineState};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The machines (`m`) whose CPU and memory count on their node, here and
/// in admission's room check (`machines::room::job_nodes`), as SQL: those
/// that may have a container there (`gantry_core::machine::may_have_container`).
/// One that holds no GPUs has none — a reclaimed one keeps its `node_id`
/// only because its volume is there, a failed create gave its container
/// back with its GPUs — so it leaves the room to others; counted, a node
/// whose dev machines were all reclaimed, or failed to start, would look
/// full to compute tasks until someone deleted them. Derived from the
/// core's rule, so the two cannot drift apart.
pub(crate) fn has_container_sql() -> String {
    let never: Vec<String> =
        MachineState::ALL.iter().filter(|s| !may_have_container(**s, true)).map(|s| format!("'{s}'")).collect();
    format!(
        "m.state NOT IN ({}) AND EXISTS (SELECT 1 FROM machine_gpus mg WHERE mg.machine_id = m.id)",
        never.join(", ")
    )
}

/// The catalogue and capacity the matcher decides from.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub catalogue: Vec<MasterImage>,
    pub regions: Vec<RegionCapacity>,
    region_ids: BTreeMap<String, i64>,
}

pub async fn snapshot(pool: &Pool) -> Result<Snapshot, PlatformError> {
    let masters: Vec<(i64, String, String, String, String, String)> = sqlx::query_as(
        "SELECT id, name, interpreter, interpreter_version, framework, framework_version FROM master_images ORDER BY id",
    )
    .fetch_all(pool)
    .await?;
    let links: Vec<(i64, i64, String, String, String)> = sqlx::query_as(
        "SELECT l.master_image_id, ri.id, r.code, ri.reference, ri.arch FROM master_image_links l
         JOIN region_images ri ON ri.id = l.region_image_id JOIN regions r ON r.id = ri.region_id",
    )
    .fetch_all(pool)
    .await?;
    let catalogue = masters
        .into_iter()
        .map(|(id, name, interpreter, interpreter_version, framework, framework_version)| MasterImage {
            region_images: links
                .iter()
                .filter(|l| l.0 == id)
                .filter_map(|l| {
                    Some(RegionImage { id: l.1, region: l.2.clone(), reference: l.3.clone(), arch: l.4.parse().ok()? })
                })
                .collect(),
            id,
            name,
            interpreter,
            interpreter_version,
            framework,
            framework_version,
        })
        .collect();
    // Free resources per schedulable node: GPUs nobody holds that the node
    // still reports and no left container may still be pinned to, and CPU
    // and memory not reserved by machines that may have a container there
    // (as admission counts them: `room`; 0 recorded = unknown = no limit).
    let nodes: Vec<(i64, String, String, i64, i64, i64, i64, String)> = sqlx::query_as(&format!(
        "SELECT n.id, n.name, r.code, r.id, n.cpu_count * 1000 - COALESCE((SELECT SUM(m.cpu_millis) FROM machines m WHERE m.node_id = n.id AND {on_node}), 0),
                n.memory_mb - COALESCE((SELECT SUM(m.memory_mb) FROM machines m WHERE m.node_id = n.id AND {on_node}), 0),
                n.cpu_count, n.arch
         FROM nodes n JOIN regions r ON r.id = n.region_id
         WHERE n.state = 'ready' AND n.last_heartbeat >= ?",
        on_node = has_container_sql(),
    ))
    .bind(now() - HEARTBEAT_TIMEOUT_SECS)
    .fetch_all(pool)
    .await?;
    let free: Vec<(i64, String, i64)> = sqlx::query_as(
        "SELECT g.node_id, g.model, COUNT(*) FROM gpus g
         WHERE g.id NOT IN (SELECT gpu_id FROM gpus_gone) AND g.id NOT IN (SELECT gpu_id FROM gpus_left_to_collector)
           AND NOT EXISTS (SELECT 1 FROM machine_gpus mg WHERE mg.gpu_id = g.id) GROUP BY g.node_id, g.model",
    )
    .fetch_all(pool)
    .await?;
    let all_regions: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, code FROM regions ORDER BY code").fetch_all(pool).await?;
    let mut regions: BTreeMap<String, RegionCapacity> = all_regions
        .iter()
        .map(|(_, code)| (code.clone(), RegionCapacity { code: code.clone(), nodes: Vec::new() }))
        .collect();
    for (id, name, region, _, cpu_free, mem_free, cpu_count, arch) in nodes {
        let unknown = cpu_count == 0;
        let node = NodeCapacity {
            name,
            arch: arch.parse().unwrap_or(Arch::Amd64),
            free_gpus: free.iter().filter(|f| f.0 == id).map(|f| (f.1.clone(), f.2 as u32)).collect(),
            free_cpu_millis: if unknown { i64::MAX } else { cpu_free },
            free_memory_mb: if unknown { i64::MAX } else { mem_free },
        };
        regions
            .entry(region)
            .or_insert_with_key(|code| RegionCapacity { code: code.clone(), nodes: Vec::new() })
            .nodes
            .push(node);
    }
    Ok(Snapshot {
        catalogue,
        regions: regions.into_values().collect(),
        region_ids: all_regions.into_iter().map(|(id, c)| (c, id)).collect(),
    })
}

/// id, requester, name, framework (+version), interpreter (+version), GPUs,
/// model, CPU, memory, command, time limit, dataset mounts (JSON).
type Pending = (i64, i64, String, String, String, String, String, u32, Option<String>, i64, i64, String, i64, String);

/// Decides the head of every group's queue with random seeds; returns how
/// many were placed.
pub async fn evaluate_queue(pool: &Pool, admissions: &Admissions) -> Result<usize, PlatformError> {
    evaluate_queue_seeded(pool, admissions, &mut || rand::random()).await
}

/// The same with the shuffle seeds from `seeds` (tests replay choices).
pub async fn evaluate_queue_seeded(
    pool: &Pool,
    admissions: &Admissions,
    seeds: &mut (dyn FnMut() -> u64 + Send),
) -> Result<usize, PlatformError> {
    // A disabled account's tasks never start (disabling cancels them; this
    // catches any left pending), and are not failed as impossible either.
    super::rules::cancel_disabled(pool, None).await?;
    // A head that can never be admitted would hold its group's queue for ever.
    super::rules::fail_impossible_heads(pool).await?;
    let heads: Vec<Pending> = sqlx::query_as(
        "SELECT c.id, c.requester_id, c.name, c.framework, c.framework_version, c.interpreter, c.interpreter_version, c.gpu_count, c.gpu_model,
                c.cpu_millis, c.memory_mb, c.command, c.time_limit_secs, c.datasets
         FROM compute_tasks c
         WHERE c.state = 'pending' AND c.id = (SELECT MIN(o.id) FROM compute_tasks o WHERE o.group_id = c.group_id AND o.state = 'pending')
         ORDER BY c.id",
    )
    .fetch_all(pool)
    .await?;
    let mut placed = 0;
    let mut snap = snapshot(pool).await?;
    // The regions and GPU models each requester's group may use (absent:
    // every region, every model).
    let allowed = crate::policy_access::region_codes_by_user(pool).await?;
    let models = models_by_user(pool).await?;
    // Decisions that leave a task waiting are recorded together; a placement
    // commits them first (admission takes the write lock itself).
    let mut tx = transitions::begin(pool).await?;
    for head in heads {
        let only = allowed.get(&head.1);
        let may_use = models.get(&head.1).map(Vec::as_slice).unwrap_or_default();
        let Some(admit) = decide_one(&mut tx, &snap, only, may_use, head, seeds()).await? else { continue };
        tx.commit().await?;
        if place(pool, admissions, &snap, admit).await? {
            placed += 1;
            // Resources changed; a task left pending changed nothing.
            snap = snapshot(pool).await?;
        }
        tx = transitions::begin(pool).await?;
    }
    tx.commit().await?;
    Ok(placed)
}

/// A placement to admit: the task, its decision and where it goes.
struct Admit {
    t: Pending,
    json: String,
    region: (i64, i64),
    code: String,
    reference: String,
}

/// Every requester's allowed GPU models through their group, sorted (users
/// of groups allowed every model absent), as admission reads them.
async fn models_by_user(pool: &Pool) -> Result<HashMap<i64, Vec<String>>, PlatformError> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT u.id, g.model FROM users u JOIN group_gpu_models g ON g.group_id = u.group_id ORDER BY u.id, g.model",
    )
    .fetch_all(pool)
    .await?;
    let mut map: HashMap<i64, Vec<String>> = HashMap::new();
    for (user, model) in rows {
        map.entry(user).or_default().push(model);
    }
    Ok(map)
}

/// Decides one task and records the decision; `Some` when it is placed.
/// `only`: the regions the requester's group may use (`None`: all); the
/// others are not in the decision's sets at all. `may_use`: the GPU models
/// it may use (empty: all); free GPUs of others are no room for a task
/// naming no model.
async fn decide_one(
    tx: &mut transitions::Tx,
    snap: &Snapshot,
    only: Option<&BTreeSet<String>>,
    may_use: &[String],
    t: Pending,
    seed: u64,
) -> Result<Option<Admit>, PlatformError> {
    let (
        id,
        _,
        _,
        framework,
        framework_version,
        interpreter,
        interpreter_version,
        gpus,
        gpu_model,
        cpu_millis,
        memory_mb,
        _,
        _,
        _,
    ) = t.clone();
    let req = TaskRequest {
        framework,
        framework_version,
        interpreter,
        interpreter_version,
        gpus,
        gpu_model,
        cpu_millis,
        memory_mb,
    };
    let decide = |catalogue: &[MasterImage], regions: &[RegionCapacity]| {
        decide_for_group(catalogue, regions, &req, may_use, seed)
    };
    let mut decision = match only {
        None => decide(&snap.catalogue, &snap.regions),
        Some(only) => {
            let catalogue: Vec<MasterImage> = snap
                .catalogue
                .iter()
                .map(|m| MasterImage {
                    region_images: m.region_images.iter().filter(|i| only.contains(&i.region)).cloned().collect(),
                    ..m.clone()
                })
                .collect();
            let regions: Vec<RegionCapacity> =
                snap.regions.iter().filter(|r| only.contains(&r.code)).cloned().collect();
            decide(&catalogue, &regions)
        }
    };
    if let (Some(only), Outcome::Rejected { reason } | Outcome::Pending { reason }) = (only, &mut decision.outcome) {
        reason.push_str(&format!(
            " (the group may use only region(s) {})",
            only.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let json = serde_json::to_string(&decision).unwrap_or_default();
    match decision.outcome {
        Outcome::Rejected { reason } => {
            transitions::compute::decided(tx, id, &json, None, Err(&reason)).await.map(|_| None)
        }
        Outcome::Pending { reason } => {
            transitions::compute::decided(tx, id, &json, None, Ok(&reason)).await.map(|_| None)
        }
        Outcome::Placed { region: code, region_image_id, reference } => {
            let region = (snap.region_ids[&code], region_image_id);
            transitions::compute::decided(
                tx,
                id,
                &json,
                Some(region),
                Ok(&format!("region {code} chosen; placing on a node")),
            )
            .await?;
            Ok(Some(Admit { t, json, region, code, reference }))
        }
    }
}

async fn place(pool: &Pool, admissions: &Admissions, snap: &Snapshot, admit: Admit) -> Result<bool, PlatformError> {
    let Admit { t, json, region, code, reference } = admit;
    let (id, requester_id, name, _, _, _, _, gpus, gpu_model, cpu_millis, memory_mb, command, _, datasets) = t;
    let requester =
        accounts::user_by_id(pool, requester_id).await?.ok_or_else(|| PlatformError::NotFound("requester".into()))?;
    // Disabled since this pass began: the machine would use the quota of
    // a group for an account nobody may use.
    if requester.disabled {
        super::rules::cancel_disabled(pool, Some(requester_id)).await?;
        return Ok(false);
    }
    // A name the requester's own machines cannot have taken.
    let mut create = CreateMachine::new(requester, gantry_core::validate::job_machine_name(id, &name), gpus, 1);
    create.gpu_model = gpu_model;
    create.cpu_millis = Some(cpu_millis);
    create.memory_mb = Some(memory_mb);
    create.datasets = serde_json::from_str(&datasets).unwrap_or_default();
    create.job = Some(Job {
        compute_task_id: id,
        region_id: snap.region_ids[&code],
        region_image_id: region.1,
        image_reference: reference,
        command: serde_json::from_str(&command).unwrap_or_default(),
        decision: json.clone(),
    });
    let ask = super::rules::Ask { gpus, gpu_model: create.gpu_model.clone(), cpu_millis, memory_mb };
    let requester = create.requester.clone();
    let mounts = create.datasets.clone();
    match admissions.create(create).await {
        Ok(_) => Ok(true),
        Err(PlatformError::Refused(why) | PlatformError::Conflict(why)) => {
            // Cancelled or placed elsewhere meanwhile: nothing left to decide.
            if transitions::compute::find_state(&mut *pool.acquire().await?, id).await?
                != Some(gantry_core::task::TaskState::Pending)
            {
                return Ok(false);
            }
            // Refused for good (the group's rules changed since the queue
            // was checked, no node could ever hold it, a dataset version it
            // mounts is gone): fail it, or the group's queue waits for ever.
            // Anything else (capacity, quota in use) is "not now".
            let never = {
                let mut conn = pool.acquire().await?;
                match crate::datasets::mounts::first_missing(&mut conn, &mounts).await? {
                    Some(gone) => {
                        Some(format!("dataset version {gone} it mounts was deleted after the task was submitted"))
                    }
                    None => super::rules::never_admitted_task(&mut conn, &requester, id, &ask).await?,
                }
            };
            if let Some(never) = never {
                super::rules::fail(pool, id, &never).await?;
                return Ok(false);
            }
            let mut tx = transitions::begin(pool).await?;
            transitions::compute::decided(
                &mut tx,
                id,
                &json,
                Some(region),
                Ok(&format!("region {code} chosen, but: {why}")),
            )
            .await?;
            tx.commit().await?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
