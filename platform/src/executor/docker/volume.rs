//! Data volumes for [`DockerExecutor`]: a loop-device ext4 volume when the
//! node allows it (size enforced), else a plain named volume (size advisory).

use super::super::loopdev::{self, LABEL_LOOP_DEVICE, LABEL_LOOP_IMAGE, LABEL_SIZE_GB};
use super::super::*;
use super::DockerExecutor;
use bollard::models::{ContainerStateStatusEnum, VolumeCreateRequest};
use bollard::query_parameters::ListVolumesOptions;
use std::collections::HashMap;

impl DockerExecutor {
    pub async fn ensure_volume(&self, spec: &MachineSpec) -> Result<VolumeInfo, ExecError> {
        let name = &spec.volume_name;
        if !loopdev::valid_volume_name(name) {
            return Err(ExecError::Failed(format!("invalid volume name {name:?}")));
        }
        let docker = self.client().await?;
        match docker.inspect_volume(name).await {
            Ok(v) => {
                if let Some(image) = v.labels.get(LABEL_LOOP_IMAGE) {
                    self.check_loop_backing(name, image, v.options.get("device").map(String::as_str)).await?;
                    return Ok(volume_info(&v, true));
                }
                return Ok(volume_info(&v, false));
            }
            Err(e) => match self.err(e, "inspect volume") {
                ExecError::NotFound(_) => {}
                other => return Err(other),
            },
        }
        let mut labels = HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), spec.instance.clone()),
            (LABEL_MACHINE.to_string(), spec.machine_id.to_string()),
            (LABEL_SIZE_GB.to_string(), spec.volume_size_gb.to_string()),
        ]);
        let why_not = match self.block_volume_dir().and_then(|dir| loopdev::enabled().map(|()| dir.to_path_buf())) {
            Err(why) => why,
            Ok(dir) => match loopdev::provision_avoiding(
                dir.clone(),
                name.clone(),
                spec.volume_size_gb,
                self.recorded_loop_devices().await?,
            )
            .await
            {
                // An image already there holds a machine's data (a kept
                // volume whose Docker volume went): an empty plain volume in
                // its place would hide it, so the create fails instead.
                Err(why) if loopdev::image_path(&dir, name).exists() => {
                    return Err(ExecError::Failed(format!(
                        "data volume {name}: its existing disk image could not be attached: {why}"
                    )))
                }
                Err(why) => why,
                Ok(lv) => {
                    let mut loop_labels = labels.clone();
                    loop_labels.insert(LABEL_LOOP_DEVICE.into(), lv.device.clone());
                    loop_labels.insert(LABEL_LOOP_IMAGE.into(), lv.image.to_string_lossy().into_owned());
                    let req = VolumeCreateRequest {
                        name: Some(name.clone()),
                        driver: Some("local".into()),
                        driver_opts: Some(HashMap::from([
                            ("type".into(), "ext4".into()),
                            ("device".into(), lv.device),
                        ])),
                        labels: Some(loop_labels),
                        ..Default::default()
                    };
                    match docker.create_volume(req).await.map_err(|e| self.err(e, "create volume")) {
                        Ok(v) => return Ok(volume_info(&v, true)),
                        // Outcome unknown (the engine may have made the
                        // volume): the image stays for the retry to find.
                        Err(e @ ExecError::Unavailable(_)) => return Err(e),
                        // An image that was there before holds a machine's
                        // data: never deleted here, and no empty plain
                        // volume in its place either.
                        Err(e) if !lv.fresh => {
                            return Err(ExecError::Failed(format!(
                                "data volume {name}: the engine refused it over its existing image: {e}"
                            )))
                        }
                        Err(e) => {
                            let _ = loopdev::release(lv.image).await;
                            e.to_string()
                        }
                    }
                }
            },
        };
        tracing::warn!(volume = %name, size_gb = spec.volume_size_gb, reason = %why_not,
            "loop-device volume unavailable; using a plain named volume whose size is NOT enforced");
        labels.insert("gantry.size_enforced".into(), "false".into());
        let req = VolumeCreateRequest { name: Some(name.clone()), labels: Some(labels), ..Default::default() };
        let v = docker.create_volume(req).await.map_err(|e| self.err(e, "create volume"))?;
        Ok(volume_info(&v, false))
    }

    /// Whether this engine's new volumes are block volumes made here (a
    /// local engine with a volume directory): where a volume pool helps.
    pub fn makes_block_volumes(&self) -> bool {
        self.block_volume_dir().is_ok()
    }

    /// The recorded loop device must be backed by this volume's image
    /// (re-attached after a reboot); anything else refuses the start.
    async fn check_loop_backing(&self, name: &str, image: &str, device: Option<&str>) -> Result<(), ExecError> {
        let refuse = |why: String| ExecError::Failed(format!("data volume {name}: {why}"));
        let dir = self.block_volume_dir().map_err(refuse)?;
        let image = loopdev::checked_image(dir, name, image).map_err(refuse)?;
        let device = device.ok_or_else(|| refuse("its loop device is not recorded".into()))?;
        loopdev::ensure_attached(image, device.to_string()).await.map_err(refuse)
    }

    /// Every loop device a Docker volume on this engine names (any
    /// installation's: the devices are the host's), by label and by the
    /// `device` option the engine mounts.
    async fn recorded_loop_devices(&self) -> Result<Vec<String>, ExecError> {
        let opts = ListVolumesOptions {
            filters: Some(HashMap::from([("label".to_string(), vec![LABEL_LOOP_DEVICE.to_string()])])),
        };
        let list = self.client().await?.list_volumes(Some(opts)).await.map_err(|e| self.err(e, "list volumes"))?;
        let mut devices: Vec<String> = Vec::new();
        for v in list.volumes.unwrap_or_default() {
            for dev in [v.labels.get(LABEL_LOOP_DEVICE), v.options.get("device")].into_iter().flatten() {
                if !devices.contains(dev) {
                    devices.push(dev.clone());
                }
            }
        }
        Ok(devices)
    }

    /// Before the archive API touches a container that is not running: the
    /// engine then mounts the container's volumes itself, so each loop
    /// volume's recorded device must hold its own image — re-attached when
    /// free (after a host reboot), refused when it holds another file.
    /// A running (or paused) container has its volumes mounted already; a
    /// missing one is the archive call's to report. `Ok(Err(why))`: a disk
    /// is not as Gantry left it; `Err`: the engine's own error.
    pub async fn check_container_volumes(&self, container_id: &str) -> Result<Result<(), String>, ExecError> {
        let docker = self.client().await?;
        let c = match docker.inspect_container(container_id, None).await {
            Ok(c) => c,
            Err(e) => {
                return match self.err(e, &format!("inspect container {container_id}")) {
                    ExecError::NotFound(_) => Ok(Ok(())),
                    other => Err(other),
                }
            }
        };
        let status = c.state.and_then(|s| s.status);
        if matches!(status, Some(ContainerStateStatusEnum::RUNNING | ContainerStateStatusEnum::PAUSED)) {
            return Ok(Ok(()));
        }
        let volumes = c
            .mounts
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.typ.as_deref() == Some("volume"))
            .filter_map(|m| m.name);
        for name in volumes {
            let v = match docker.inspect_volume(&name).await {
                Ok(v) => v,
                Err(e) => match self.err(e, "inspect volume") {
                    ExecError::NotFound(_) => continue,
                    other => return Err(other),
                },
            };
            if let Some(image) = v.labels.get(LABEL_LOOP_IMAGE) {
                if let Err(why) =
                    self.check_loop_backing(&name, image, v.options.get("device").map(String::as_str)).await
                {
                    return Ok(Err(why.to_string()));
                }
            }
        }
        Ok(Ok(()))
    }

    pub async fn remove_volume(&self, name: &str) -> Result<(), ExecError> {
        let docker = self.client().await?;
        let labelled = match docker.inspect_volume(name).await {
            Ok(v) => v.labels.get(LABEL_LOOP_IMAGE).cloned(),
            Err(e) => match self.err(e, "inspect volume") {
                ExecError::NotFound(_) => None,
                other => return Err(other),
            },
        };
        match docker.remove_volume(name, None::<bollard::query_parameters::RemoveVolumeOptions>).await {
            Ok(()) => {}
            Err(e) => match self.err(e, &format!("remove volume {name}")) {
                ExecError::NotFound(_) => {}
                other => return Err(other),
            },
        }
        self.release_image(name, labelled).await.map_err(|e| {
            ExecError::Failed(format!("volume {name} removed, but its loop device cleanup failed: {e}"))
        })?;
        Ok(())
    }

    /// Detaches and deletes the block image of volume `name`; returns the
    /// loop devices detached. Only ever "<dir>/<name>.img", whatever a label
    /// claims; also the image of a half-done create whose Docker volume
    /// never appeared.
    async fn release_image(&self, name: &str, labelled: Option<String>) -> Result<Vec<String>, String> {
        let (Ok(dir), true) = (self.block_volume_dir(), loopdev::valid_volume_name(name)) else {
            return Ok(Vec::new());
        };
        let image = match labelled {
            Some(l) => loopdev::checked_image(dir, name, &l)?,
            None => loopdev::image_path(dir, name),
        };
        loopdev::release(image).await
    }

    /// Block images in this node's volume directory named as installation
    /// `instance` names them and at least `min_age` old (see
    /// [`loopdev::old_images`]); none where the node has no block volumes.
    pub fn list_volume_images(&self, instance: &str, min_age: std::time::Duration) -> Vec<String> {
        match self.block_volume_dir() {
            Ok(dir) => loopdev::old_images(dir, instance, min_age),
            Err(_) => Vec::new(),
        }
    }

    /// Removes the block image of volume `name` — with the same teardown as
    /// [`remove_volume`](Self::remove_volume) — only if no Docker volume of
    /// that name exists (of any installation): `None` then, and nothing is
    /// touched. `Some(devices)`: removed, with the loop devices detached.
    /// Whether a machine or kept volume names it is the caller's to check.
    pub async fn remove_orphan_image(&self, name: &str) -> Result<Option<Vec<String>>, ExecError> {
        let docker = self.client().await?;
        match docker.inspect_volume(name).await {
            Ok(_) => return Ok(None),
            Err(e) => match self.err(e, "inspect volume") {
                ExecError::NotFound(_) => {}
                other => return Err(other),
            },
        }
        self.release_image(name, None)
            .await
            .map(Some)
            .map_err(|e| ExecError::Failed(format!("volume image {name}: loop device cleanup failed: {e}")))
    }

    pub async fn list_managed_volumes(&self, instance: &str) -> Result<Vec<String>, ExecError> {
        let opts = ListVolumesOptions {
            filters: Some(HashMap::from([("label".to_string(), vec![format!("{LABEL_INSTANCE}={instance}")])])),
        };
        let list = self.client().await?.list_volumes(Some(opts)).await.map_err(|e| self.err(e, "list volumes"))?;
        Ok(list.volumes.unwrap_or_default().into_iter().map(|v| v.name).collect())
    }
}

fn volume_info(v: &bollard::models::Volume, size_enforced: bool) -> VolumeInfo {
    let mountpoint = (!v.mountpoint.is_empty()).then(|| v.mountpoint.clone());
    VolumeInfo { name: v.name.clone(), size_enforced, mountpoint }
}
