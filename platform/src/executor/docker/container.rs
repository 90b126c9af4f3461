//! Container operations for [`DockerExecutor`].

use super::super::*;
use super::{DockerExecutor, EXEC_OUTPUT_CAP, EXEC_TIMEOUT, STOP_GRACE_SECS};
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, ContainerStateStatusEnum, DeviceRequest, HostConfig, Mount, MountType, RestartPolicy,
    RestartPolicyNameEnum,
};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions, RestartContainerOptions,
    StopContainerOptions,
};
use futures_util::StreamExt;
use std::collections::HashMap;

/// The data volume, then each dataset version read-only (a bind mount:
/// the engine refuses a missing source instead of creating it).
fn mounts(spec: &MachineSpec) -> Vec<Mount> {
    let data = Mount {
        target: Some(DATA_MOUNT.into()),
        source: Some(spec.volume_name.clone()),
        typ: Some(MountType::VOLUME),
        ..Default::default()
    };
    let datasets = spec.mounts.iter().map(|m| Mount {
        target: Some(m.target.clone()),
        source: Some(m.source.clone()),
        typ: Some(MountType::BIND),
        read_only: Some(true),
        ..Default::default()
    });
    std::iter::once(data).chain(datasets).collect()
}

impl DockerExecutor {
    pub async fn create_container(&self, spec: &MachineSpec) -> Result<ContainerInfo, ExecError> {
        let nvidia = self.has_nvidia().await?;
        let uuids = spec.gpu_uuids.join(",");
        let indexes = spec.gpu_indexes.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let labels = HashMap::from([
            (LABEL_MACHINE.to_string(), spec.machine_id.to_string()),
            (LABEL_TASK.to_string(), spec.task_id.to_string()),
            (LABEL_OWNER.to_string(), spec.owner.clone()),
            (LABEL_GROUP.to_string(), spec.group.clone()),
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), spec.instance.clone()),
            ("gantry.gpu.uuids".to_string(), uuids.clone()),
            ("gantry.gpu.indexes".to_string(), indexes),
        ]);
        // Without an nvidia runtime the env var is only informative (the
        // simulated-GPU setup); with one, the device request pins the GPUs.
        let device_requests = (nvidia && !spec.gpu_uuids.is_empty()).then(|| {
            vec![DeviceRequest {
                driver: Some("nvidia".into()),
                device_ids: Some(spec.gpu_uuids.clone()),
                capabilities: Some(vec![vec!["gpu".into()]]),
                ..Default::default()
            }]
        });
        // The engine enforces the writable layer's size where its driver
        // can; elsewhere the disk watcher does.
        let storage_opt = match spec.limits.root_disk_mb {
            0 => None,
            mb => match self.storage().await {
                Ok((driver, _)) => gantry_core::disk::storage_opt_size(driver, mb)
                    .map(|size| HashMap::from([("size".to_string(), size)])),
                Err(e @ ExecError::Unavailable(_)) => return Err(e),
                // An engine whose /info we cannot read gets no option.
                Err(_) => None,
            },
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: spec.command.clone(),
            hostname: Some(spec.name.clone()),
            labels: Some(labels),
            env: Some(vec![
                format!("NVIDIA_VISIBLE_DEVICES={}", if uuids.is_empty() { "none" } else { &uuids }),
                format!("GANTRY_MACHINE={}", spec.name),
            ]),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                mounts: Some(mounts(spec)),
                device_requests,
                nano_cpus: Some(spec.limits.cpu_millis * 1_000_000),
                memory: Some(spec.limits.memory_mb * 1024 * 1024),
                pids_limit: Some(spec.limits.pids),
                storage_opt,
                // Docker's default capability set (nothing added), and no
                // privilege gain through setuid binaries.
                security_opt: Some(vec!["no-new-privileges:true".into()]),
                privileged: Some(false),
                // The reconciler owns desired state; the engine must not revive.
                restart_policy: Some(RestartPolicy {
                    name: Some(RestartPolicyNameEnum::NO),
                    maximum_retry_count: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let opts = CreateContainerOptions { name: Some(spec.container_name()), ..Default::default() };
        let docker = self.client().await?;
        match docker.create_container(Some(opts), body).await {
            Ok(r) => Ok(ContainerInfo { id: r.id }),
            // The create endpoint never pulls, so 404 here means the image.
            Err(e) => Err(match self.err(e, "create container") {
                ExecError::NotFound(_) => ExecError::ImageMissing(format!(
                    "image {} is not present on node {}; build or load it first (Gantry never pulls)",
                    spec.image, self.inner.endpoint
                )),
                ExecError::Failed(m) if m.contains("HTTP 409") => {
                    ExecError::Failed(format!("container {} already exists: {m}", spec.container_name()))
                }
                other => other,
            }),
        }
    }

    pub async fn start_container(&self, id: &str) -> Result<(), ExecError> {
        let c = self.client().await?;
        c.start_container(id, None).await.map_err(|e| self.err(e, &format!("start container {id}")))
    }

    pub async fn restart_container(&self, id: &str) -> Result<(), ExecError> {
        let opts = RestartContainerOptions { t: Some(STOP_GRACE_SECS), ..Default::default() };
        let c = self.client().await?;
        c.restart_container(id, Some(opts)).await.map_err(|e| self.err(e, &format!("restart container {id}")))
    }

    pub async fn stop_container(&self, id: &str) -> Result<(), ExecError> {
        let opts = StopContainerOptions { t: Some(STOP_GRACE_SECS), ..Default::default() };
        let c = self.client().await?;
        c.stop_container(id, Some(opts)).await.map_err(|e| self.err(e, &format!("stop container {id}")))
    }

    /// Stops with the grace period first, so the machine's processes can
    /// flush to the volume, then removes.
    pub async fn remove_container(&self, id: &str) -> Result<(), ExecError> {
        match self.stop_container(id).await {
            Ok(()) | Err(ExecError::NotFound(_)) => {}
            Err(e @ ExecError::Unavailable(_)) => return Err(e),
            // Already stopped (304) and the like: removal decides.
            Err(_) => {}
        }
        let opts = RemoveContainerOptions { force: true, ..Default::default() };
        match self.client().await?.remove_container(id, Some(opts)).await {
            Ok(()) => Ok(()),
            Err(e) => match self.err(e, &format!("remove container {id}")) {
                ExecError::NotFound(_) => Ok(()),
                other => Err(other),
            },
        }
    }

    pub async fn inspect_container(&self, id: &str) -> Result<ContainerState, ExecError> {
        let r = match self.client().await?.inspect_container(id, None).await {
            Ok(r) => r,
            Err(e) => {
                return match self.err(e, &format!("inspect container {id}")) {
                    ExecError::NotFound(_) => Ok(ContainerState::missing()),
                    other => Err(other),
                }
            }
        };
        let state = r.state.unwrap_or_default();
        let status = match state.status {
            Some(ContainerStateStatusEnum::RUNNING | ContainerStateStatusEnum::STOPPING) => ContainerStatus::Running,
            Some(ContainerStateStatusEnum::RESTARTING) => ContainerStatus::Restarting,
            Some(ContainerStateStatusEnum::PAUSED) => ContainerStatus::Paused,
            Some(ContainerStateStatusEnum::CREATED) | Some(ContainerStateStatusEnum::EMPTY) | None => {
                ContainerStatus::Created
            }
            Some(_) => ContainerStatus::Exited { code: state.exit_code.unwrap_or(0) },
        };
        // Docker reports the zero time for a never-started container.
        let started_at = state.started_at.filter(|s| !s.is_empty() && !s.starts_with("0001-"));
        Ok(ContainerState { status, restart_count: r.restart_count.unwrap_or(0), started_at })
    }

    pub async fn list_managed(&self, instance: &str) -> Result<Vec<ManagedContainer>, ExecError> {
        let opts = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![LABEL_MACHINE.to_string(), format!("{LABEL_INSTANCE}={instance}")],
            )])),
            ..Default::default()
        };
        let list =
            self.client().await?.list_containers(Some(opts)).await.map_err(|e| self.err(e, "list containers"))?;
        Ok(list
            .into_iter()
            .map(|c| ManagedContainer {
                id: c.id.unwrap_or_default(),
                machine_id: c.labels.as_ref().and_then(|l| l.get(LABEL_MACHINE)).and_then(|m| m.parse().ok()),
                name: c
                    .names
                    .and_then(|n| n.into_iter().next())
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string(),
                status: summary_status(c.state.map(|s| s.to_string()).as_deref(), c.status.as_deref()),
            })
            .collect())
    }

    /// Meant for short commands: the output stream is not covered by the
    /// per-request timeout, so the whole exec is bounded by `EXEC_TIMEOUT`.
    pub async fn exec(&self, id: &str, cmd: &[&str]) -> Result<(i64, String), ExecError> {
        let docker = self.client().await?;
        let what = format!("exec in container {id}");
        let opts = CreateExecOptions {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            cmd: Some(cmd.to_vec()),
            ..Default::default()
        };
        let created = docker.create_exec(id, opts).await.map_err(|e| self.err(e, &what))?;
        let collect = async {
            // Bytes, not per-chunk strings: a UTF-8 character may span chunks.
            let mut out = Vec::new();
            if let StartExecResults::Attached { mut output, .. } =
                docker.start_exec(&created.id, None).await.map_err(|e| self.err(e, &what))?
            {
                while let Some(chunk) = output.next().await {
                    let bytes = chunk.map_err(|e| self.err(e, &what))?.into_bytes();
                    if out.len() + bytes.len() <= EXEC_OUTPUT_CAP {
                        out.extend_from_slice(&bytes);
                    }
                }
            }
            Ok::<_, ExecError>(String::from_utf8_lossy(&out).into_owned())
        };
        let out = tokio::time::timeout(EXEC_TIMEOUT, collect)
            .await
            .map_err(|_| ExecError::Failed(format!("{what}: {cmd:?} did not finish within {EXEC_TIMEOUT:?}")))??;
        let info = docker.inspect_exec(&created.id).await.map_err(|e| self.err(e, &what))?;
        Ok((info.exit_code.unwrap_or(-1), out))
    }
}

/// Maps a container-list entry; the list API has no exit code field, only
/// the human status text "Exited (137) 5 seconds ago".
fn summary_status(state: Option<&str>, text: Option<&str>) -> ContainerStatus {
    match state.unwrap_or("") {
        "running" => ContainerStatus::Running,
        "restarting" => ContainerStatus::Restarting,
        "paused" => ContainerStatus::Paused,
        "created" | "" => ContainerStatus::Created,
        _ => {
            let code = text
                .and_then(|t| t.split_once('('))
                .and_then(|(_, rest)| rest.split_once(')'))
                .and_then(|(n, _)| n.trim().parse().ok())
                .unwrap_or(0);
            ContainerStatus::Exited { code }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_status_text() {
        assert_eq!(
            summary_status(Some("exited"), Some("Exited (137) 5 seconds ago")),
            ContainerStatus::Exited { code: 137 }
        );
        assert_eq!(summary_status(Some("running"), Some("Up 3 minutes")), ContainerStatus::Running);
    }
}
