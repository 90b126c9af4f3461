//! Everything a task needs to know about its machine, read fresh when the
//! task starts.

use crate::{db::Pool, executor::MachineSpec, PlatformError};

#[derive(Debug, Clone)]
pub struct MachineContext {
    pub spec: MachineSpec,
    pub node_id: i64,
    pub node_name: String,
    /// A compute task's machine: its container runs to completion.
    pub is_job: bool,
    pub container_id: Option<String>,
}

pub async fn load(pool: &Pool, machine_id: i64, task_id: i64) -> Result<MachineContext, PlatformError> {
    type Row = (
        String,
        String,
        String,
        String,
        Option<i64>,
        Option<String>,
        String,
        i64,
        Option<String>,
        i64,
        i64,
        i64,
        String,
        Option<String>,
        i64,
    );
    let row: Option<Row> = sqlx::query_as(
        "SELECT m.name, u.username, g.name, i.reference, m.node_id, n.name, m.volume_name, m.volume_size_gb, m.container_id,
                m.cpu_millis, m.memory_mb, m.pids_limit, m.workload, m.command, g.root_disk_mb
         FROM machines m JOIN users u ON u.id = m.owner_id JOIN groups g ON g.id = m.group_id
         JOIN images i ON i.id = m.image_id LEFT JOIN nodes n ON n.id = m.node_id WHERE m.id = ?",
    )
    .bind(machine_id)
    .fetch_optional(pool)
    .await?;
    let (
        name,
        owner,
        group,
        image,
        node_id,
        node_name,
        volume_name,
        volume_size_gb,
        container_id,
        cpu_millis,
        memory_mb,
        pids_limit,
        workload,
        command,
        root_disk_mb,
    ) = row.ok_or_else(|| PlatformError::NotFound(format!("machine #{machine_id}")))?;
    let node_id = node_id.ok_or_else(|| PlatformError::Internal(format!("machine {name} has no node")))?;
    let gpus: Vec<(i64, String)> = sqlx::query_as(
        "SELECT g.idx, g.uuid FROM machine_gpus mg JOIN gpus g ON g.id = mg.gpu_id WHERE mg.machine_id = ? ORDER BY g.idx",
    )
    .bind(machine_id)
    .fetch_all(pool)
    .await?;
    let mounts = crate::datasets::mounts::of_machine(pool, machine_id).await?;
    let instance = crate::machines::instance_id(pool).await?;
    Ok(MachineContext {
        spec: MachineSpec {
            instance: instance.clone(),
            machine_id,
            task_id,
            name,
            owner,
            group,
            image,
            gpu_uuids: gpus.iter().map(|(_, u)| u.clone()).collect(),
            gpu_indexes: gpus.iter().map(|(i, _)| *i as u32).collect(),
            volume_name,
            volume_size_gb,
            // The group's limit as it is when the container is made.
            limits: crate::executor::Limits { cpu_millis, memory_mb, pids: pids_limit, root_disk_mb },
            command: command.and_then(|c| serde_json::from_str(&c).ok()),
            mounts: mounts.iter().map(|m| m.read_only()).collect(),
        },
        node_id,
        node_name: node_name.unwrap_or_default(),
        is_job: workload.parse::<gantry_core::task::Workload>()? == gantry_core::task::Workload::Job,
        container_id,
    })
}

/// The machine's node was marked lost, or removed after that (its lost
/// machines keep no node): nothing is left to do on an engine.
pub async fn node_gone(pool: &Pool, machine_id: i64) -> Result<bool, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT m.node_id IS NULL OR COALESCE(n.state = 'lost', 1) FROM machines m LEFT JOIN nodes n ON n.id = m.node_id WHERE m.id = ?",
    )
    .bind(machine_id)
    .fetch_optional(pool)
    .await?
    .unwrap_or(false))
}
