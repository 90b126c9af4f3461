//! Writing what admission decided: the machine, its held GPUs, its volume,
//! its dataset mounts and its task, in the admission transaction; and a
//! refused create recorded as a failed task.

use super::{Admitted, CreateMachine, KeptVolume};
use crate::{
    error::is_unique_violation,
    transitions::{self, task::NewTask},
    PlatformError,
};
use gantry_core::task::{TaskKind, TaskState, Workload};
use sqlx::SqliteConnection;

/// Records a refused create as a failed task (so it shows in the task list
/// with its reason) and returns the error for the requester.
pub(super) async fn refuse(
    conn: &mut SqliteConnection,
    req: &CreateMachine,
    reason: String,
    _now: i64,
) -> Result<PlatformError, PlatformError> {
    if req.job.is_some() {
        // A compute task stays pending with this reason and is tried again.
        return Ok(PlatformError::Refused(reason));
    }
    let task_id = transitions::task::insert_pending(conn, &new_task(req, None, "accepted")).await?;
    transitions::task::set_state(conn, task_id, TaskState::Pending, TaskState::Failed, &reason).await?;
    Ok(PlatformError::Refused(reason))
}

fn new_task<'a>(req: &'a CreateMachine, machine_id: Option<i64>, message: &'a str) -> NewTask<'a> {
    NewTask {
        kind: TaskKind::Create,
        machine_id,
        machine_name: &req.name,
        requester_id: req.requester.id,
        group_id: req.requester.group_id,
        keep_volume: false,
        message,
    }
}

/// Writes the machine, its GPUs and its task; `None` when the owner already
/// has a live machine of that name (nothing written).
pub(crate) async fn record_admission(
    conn: &mut SqliteConnection,
    req: &CreateMachine,
    image_id: i64,
    alloc: &gantry_core::alloc::Allocation,
    kept: Option<&KeptVolume>,
    now: i64,
) -> Result<Option<Admitted>, PlatformError> {
    let n = i64::from(req.gpu_count);
    let limits = req.limits();
    // A new volume's name derives from the machine id, known after insert.
    let volume = kept.map(|k| k.name.clone()).unwrap_or_else(|| format!("pending-{}", rand::random::<u64>()));
    let size = kept.map(|k| k.size_gb).unwrap_or(req.volume_size_gb);
    let inserted = sqlx::query_scalar(
        "INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, node_id, volume_name, volume_size_gb,
                               cpu_millis, memory_mb, pids_limit, workload, command, state, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'creating', ?, ?) RETURNING id",
    )
    .bind(&req.name)
    .bind(req.requester.id)
    .bind(req.requester.group_id)
    .bind(image_id)
    .bind(n)
    .bind(&alloc.model)
    .bind(alloc.node_id)
    .bind(&volume)
    .bind(size)
    .bind(limits.cpu_millis)
    .bind(limits.memory_mb)
    .bind(limits.pids)
    .bind(if req.job.is_some() { Workload::Job } else { Workload::Dev }.as_str())
    .bind(req.job.as_ref().map(|j| serde_json::to_string(&j.command).unwrap_or_default()))
    .bind(now)
    .bind(now)
    .fetch_one(&mut *conn)
    .await;
    let machine_id: i64 = match inserted {
        Ok(id) => id,
        Err(e) if is_unique_violation(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match kept {
        None => {
            let sql = format!("UPDATE machines SET volume_name = {} WHERE id = ?", crate::machines::VOLUME_NAME_SQL);
            sqlx::query(&sql).bind(machine_id).execute(&mut *conn).await?;
        }
        Some(k) => {
            sqlx::query("DELETE FROM kept_volumes WHERE name = ?").bind(&k.name).execute(&mut *conn).await?;
        }
    }
    crate::datasets::mounts::attach(conn, machine_id, &req.datasets).await?;
    // One statement for all its GPUs; the primary key on gpu_id makes
    // holding a GPU twice impossible.
    let placeholders = vec!["?"; alloc.gpus.len()].join(", ");
    let sql =
        format!("INSERT INTO machine_gpus (gpu_id, machine_id) SELECT id, ? FROM gpus WHERE uuid IN ({placeholders})");
    let mut held = sqlx::query(&sql).bind(machine_id);
    for gpu in &alloc.gpus {
        held = held.bind(&gpu.uuid);
    }
    if held.execute(&mut *conn).await?.rows_affected() != alloc.gpus.len() as u64 {
        return Err(PlatformError::Internal(format!("GPUs of machine {} vanished during admission", req.name)));
    }
    let gpu_list = alloc.gpus.iter().map(|g| g.index.to_string()).collect::<Vec<_>>().join(",");
    let task_id = transitions::task::insert_pending(conn, &new_task(req, Some(machine_id), "accepted")).await?;
    let placed = format!("allocated {n} × {} on {} (GPU {gpu_list})", alloc.model, alloc.node_name);
    transitions::task::set_state(conn, task_id, TaskState::Pending, TaskState::Scheduled, &placed).await?;
    if let Some(job) = &req.job {
        transitions::compute::scheduled(conn, job, machine_id, &placed).await?;
    }
    Ok(Some(Admitted {
        machine_id,
        task_id,
        node_name: alloc.node_name.clone(),
        gpu_indexes: alloc.gpus.iter().map(|g| g.index).collect(),
        model: alloc.model.clone(),
    }))
}
