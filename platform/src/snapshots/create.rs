//! Machines from snapshots. The image lives on the node where it was
//! committed, so a new machine from it is placed on that node — by the same
//! scheduling core, group rules and quota as any create, in one
//! transaction — and a reinstall from it is for machines on that node.

use crate::{
    accounts::User,
    audit, cluster,
    db::Pool,
    machines::{check_limits, check_node, load_policy, record_admission, Admitted, CreateMachine},
    now,
    transitions::{self, reclaim::busy, snapshot, task},
    PlatformError,
};
use gantry_core::{
    alloc::{allocate, AllocationRequest, ClusterView},
    snapshot::{SnapshotOrigin, SnapshotState},
    task::{accepts, TaskKind, TaskState, Workload},
    validate,
};

/// image ref, node, state, message, name, origin, machine name, GPU model, workload, owner,
/// and the CPU and memory of the machine it was taken of.
type SnapshotRow = (String, Option<i64>, String, String, String, String, String, String, String, i64, i64, i64);

/// What a usable snapshot gives a machine made from it: image ref, node,
/// name, GPU model, and the CPU (millis) and memory (MB) of its machine.
type Usable = (String, i64, String, String, i64, i64);

/// A ready user snapshot of the user's own (an admin: any) that the
/// user's group may use: (image ref, node, model of the machine it was
/// taken of).
async fn usable(conn: &mut sqlx::SqliteConnection, who: &User, id: i64) -> Result<Usable, PlatformError> {
    let (cond, bind) = crate::machines::visibility(who, "s.group_id");
    let row: Option<SnapshotRow> = sqlx::query_as(&format!(
        "SELECT s.image_ref, s.node_id, s.state, s.message, s.name, s.origin, s.machine_name, m.gpu_model, m.workload, s.owner_id, m.cpu_millis, m.memory_mb
         FROM snapshots s JOIN machines m ON m.id = s.machine_id WHERE s.id = ? AND ({cond})"
    ))
    .bind(id)
    .bind(bind)
    .fetch_optional(&mut *conn)
    .await?;
    let (reference, node_id, state, message, name, origin, machine_name, model, workload, owner, cpu_millis, memory_mb) =
        row.ok_or_else(|| PlatformError::NotFound("snapshot".into()))?;
    let (state, origin) = (state.parse::<SnapshotState>()?, origin.parse::<SnapshotOrigin>()?);
    // A snapshot holds its machine's files outside /data — keys, tokens,
    // shell history — which group members may not reach (they cannot
    // enter the machine, nor take its kept volume): a machine made or
    // reinstalled from it would hand them over.
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict(format!(
            "snapshot {name} is another member's: it holds their files outside /data, so only they (or an admin) can make a machine from it or reinstall from it"
        )));
    }
    // One an admin took of a compute task's machine (or one taken before
    // that was refused) is still the task's region image: not a user's dev
    // machine.
    super::refuse_job_machine(who, workload.parse()?)?;
    // A reclaim snapshot is its machine's restore point, not one of the
    // group's snapshots: the quota does not count it and the sweep deletes
    // it once its machine no longer needs it. Machines made from it would
    // let a group over its quota keep any number of images by letting
    // machines go idle.
    if origin == SnapshotOrigin::Reclaim {
        return Err(PlatformError::Conflict(format!(
            "snapshot {name} is machine {machine_name}'s restore point from an idle reclaim; restore the machine instead, or take a snapshot of it once restored"
        )));
    }
    if state == SnapshotState::Failed && message == super::delete::DELETING {
        return Err(PlatformError::Conflict(format!("snapshot {name} is being deleted")));
    }
    if state != SnapshotState::Ready {
        return Err(PlatformError::Conflict(format!("snapshot {name} is {state}, not ready")));
    }
    let node_id = node_id
        .ok_or_else(|| PlatformError::Conflict(format!("snapshot {name}'s node was removed; it cannot be used")))?;
    Ok((reference, node_id, name, model, cpu_millis, memory_mb))
}

/// A new machine from snapshot `snapshot_id`: its files as they were when
/// the snapshot was taken, a new data volume, on the snapshot's node.
/// CPU and memory not given are those of the machine the snapshot was
/// taken of (they were within its group's limits), not the defaults.
pub async fn create_machine(pool: &Pool, mut req: CreateMachine, snapshot_id: i64) -> Result<Admitted, PlatformError> {
    validate::name("machine name", &req.name)?;
    validate::in_range("GPU count", req.gpu_count as i64, 1, 64)?;
    validate::in_range(
        "volume size (GB)",
        req.volume_size_gb,
        crate::machines::VOLUME_GB_MIN,
        crate::machines::VOLUME_GB_MAX,
    )?;
    let mut tx = transitions::begin(pool).await?;
    // The account as it is now, under the write lock (as admission does).
    if let Some(why) = crate::machines::admission::requester_changed(&mut tx, &req.requester).await? {
        return Err(PlatformError::Refused(why));
    }
    let (reference, node_id, snap_name, model, cpu_millis, memory_mb) =
        usable(&mut tx, &req.requester, snapshot_id).await?;
    req.cpu_millis = req.cpu_millis.or(Some(cpu_millis));
    req.memory_mb = req.memory_mb.or(Some(memory_mb));
    let refuse =
        |reason: String| PlatformError::Refused(format!("machine {} from snapshot {snap_name}: {reason}", req.name));
    let policy = load_policy(&mut tx, req.requester.group_id).await?;
    check_limits(&mut tx, &req, &policy).await?.map_err(refuse)?;
    check_node(&mut tx, node_id, &req.limits()).await?.map_err(refuse)?;
    if let Some(why) = crate::disk::nodes::refusal(&mut tx, node_id).await? {
        return Err(refuse(format!("{why} (a snapshot's image lives on the node it was taken on)")));
    }
    // The snapshot's node is fixed: its region must be one the group may use.
    if let Some(why) =
        crate::policy_access::refusal_for_nodes(&mut tx, req.requester.group_id, &policy.group_name, &[node_id]).await?
    {
        return Err(refuse(format!("{why} (a snapshot's image lives on the node it was taken on)")));
    }
    // Its files come from an image the group may no longer use.
    let base = base_image(&mut tx, snapshot_id).await?;
    let base = base.as_ref().map(|(id, name)| (*id, name.as_str()));
    if let Some(why) =
        crate::machines::admission::image_refusal(&mut tx, req.requester.group_id, &policy.group_name, base).await?
    {
        return Err(refuse(format!("{why}; snapshot {snap_name} comes from that image")));
    }
    let full = cluster::load_view(&mut tx).await?;
    let only = ClusterView { nodes: full.nodes.into_iter().filter(|n| n.id == node_id).collect(), ..full };
    let request = AllocationRequest { gpu_count: req.gpu_count, model: req.gpu_model.clone().or(Some(model)) };
    let alloc = allocate(&only, &policy, &request, now())
        .map_err(|r| refuse(format!("{r} (a snapshot's image lives on the node it was taken on)")))?;
    let image = snapshot::image_row(&mut tx, &reference).await?;
    let admitted = record_admission(&mut tx, &req, image, &alloc, None, now())
        .await?
        .ok_or_else(|| PlatformError::Conflict(format!("you already have a machine named \"{}\"", req.name)))?;
    sqlx::query("UPDATE machines SET from_snapshot_id = ? WHERE id = ?")
        .bind(snapshot_id)
        .bind(admitted.machine_id)
        .execute(&mut *tx)
        .await?;
    let done =
        sqlx::query("UPDATE groups SET gpus_in_use = gpus_in_use + ?1 WHERE id = ?2 AND gpus_in_use + ?1 <= gpu_quota")
            .bind(i64::from(req.gpu_count))
            .bind(req.requester.group_id)
            .execute(&mut *tx)
            .await?;
    if done.rows_affected() != 1 {
        return Err(PlatformError::Internal("quota check failed; nothing was changed".into()));
    }
    audit::record(
        &mut *tx,
        Some(req.requester.id),
        "machine.admit",
        &format!(
            "machine {} from snapshot {snap_name} ({} × {}) on {}; group {} quota deducted",
            req.name, req.gpu_count, alloc.model, alloc.node_name, req.requester.group_name
        ),
    )
    .await?;
    tx.commit().await?;
    Ok(admitted)
}

/// Reinstalls machine `machine_id` from snapshot `snapshot_id` (a new
/// container from the snapshot's image, same data volume). The task
/// carries the image; the machine's own changes when the reinstall runs.
pub async fn reinstall_from(pool: &Pool, who: &User, machine_id: i64, snapshot_id: i64) -> Result<i64, PlatformError> {
    let mut tx = transitions::begin(pool).await?;
    let (cond, bind) = crate::machines::visibility(who, "group_id");
    let row: Option<(i64, Option<i64>, String)> =
        sqlx::query_as(&format!("SELECT owner_id, node_id, workload FROM machines WHERE id = ? AND ({cond})"))
            .bind(machine_id)
            .bind(bind)
            .fetch_optional(&mut *tx)
            .await?;
    let (owner, machine_node, workload) = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict("only the machine's owner, or an admin, can reinstall it".into()));
    }
    // Not even by an admin: its new container would run the job's command
    // again, which runs at most once (see `machines::request_operation`).
    if workload.parse::<Workload>()? == Workload::Job {
        return Err(PlatformError::Conflict(
            "that machine runs a compute task, whose command runs at most once: it is not reinstalled; cancel the task (or delete the machine) instead".into(),
        ));
    }
    let (reference, node_id, snap_name, ..) = usable(&mut tx, who, snapshot_id).await?;
    let cur = transitions::machine::current(&mut tx, machine_id).await?;
    accepts(&cur.name, cur.state, TaskKind::Reinstall).map_err(PlatformError::Conflict)?;
    gantry_core::machine::may_start(&cur.name, cur.held as u32, cur.gpu_count as u32)
        .map_err(PlatformError::Conflict)?;
    // As a plain reinstall: its container would be removed first, and the
    // new one fail to start on the GPU runtime's own error.
    crate::machines::refuse_if_gpus_gone(&mut tx, machine_id, &cur.name).await?;
    if machine_node != Some(node_id) {
        return Err(PlatformError::Conflict(format!(
            "snapshot {snap_name} lives on another node than machine {}; make a new machine from it instead",
            cur.name
        )));
    }
    if busy(&mut tx, machine_id).await? {
        return Err(PlatformError::Conflict(format!(
            "machine {} is busy with another operation; wait for it to finish",
            cur.name
        )));
    }
    // As a create from it would: a machine cannot take files of an image its
    // group may no longer use — unless it comes from that image itself (a
    // plain reinstall would give it the same).
    let base = base_image(&mut tx, snapshot_id).await?;
    let own: Option<i64> = sqlx::query_scalar(
        "SELECT CASE WHEN i.internal = 0 THEN m.image_id ELSE (SELECT p.base_image_id FROM snapshots p WHERE p.id = m.from_snapshot_id) END
         FROM machines m JOIN images i ON i.id = m.image_id WHERE m.id = ?",
    )
    .bind(machine_id)
    .fetch_one(&mut *tx)
    .await?;
    if base.as_ref().map(|b| b.0) != own || own.is_none() {
        let group: String =
            sqlx::query_scalar("SELECT name FROM groups WHERE id = ?").bind(cur.group_id).fetch_one(&mut *tx).await?;
        let base = base.as_ref().map(|(id, name)| (*id, name.as_str()));
        if let Some(why) = crate::machines::admission::image_refusal(&mut tx, cur.group_id, &group, base).await? {
            return Err(PlatformError::Refused(format!(
                "machine {} from snapshot {snap_name}: {why}; snapshot {snap_name} comes from that image",
                cur.name
            )));
        }
    }
    let image = snapshot::image_row(&mut tx, &reference).await?;
    let task_id = task::insert_pending(
        &mut tx,
        &task::NewTask {
            kind: TaskKind::Reinstall,
            machine_id: Some(machine_id),
            machine_name: &cur.name,
            requester_id: who.id,
            group_id: cur.group_id,
            keep_volume: false,
            message: "accepted",
        },
    )
    .await?;
    // The machine takes the image only when the reinstall begins (see
    // `transitions::run::begin`): a reinstall cancelled, or ended with its
    // node, before then leaves the machine on the image it had.
    snapshot::set_payload(&mut tx, task_id, &serde_json::json!({ "image_id": image, "from_snapshot_id": snapshot_id }))
        .await?;
    task::set_state(
        &mut tx,
        task_id,
        TaskState::Pending,
        TaskState::Scheduled,
        &format!("reinstall from snapshot {snap_name}"),
    )
    .await?;
    audit::record(
        &mut *tx,
        Some(who.id),
        "machine.reinstall",
        &format!("machine {} from snapshot {snap_name} ({reference})", cur.name),
    )
    .await?;
    tx.commit().await?;
    Ok(task_id)
}

/// The image snapshot `snapshot_id`'s files come from (id, name), which the
/// group's image rule applies to; None when it is no longer known.
async fn base_image(
    conn: &mut sqlx::SqliteConnection,
    snapshot_id: i64,
) -> Result<Option<(i64, String)>, PlatformError> {
    Ok(sqlx::query_as("SELECT i.id, i.name FROM snapshots s JOIN images i ON i.id = s.base_image_id WHERE s.id = ?")
        .bind(snapshot_id)
        .fetch_optional(&mut *conn)
        .await?)
}
