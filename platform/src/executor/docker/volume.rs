//! Data volumes for [`DockerExecutor`]: a loop-device ext4 volume when the
//! node allows it (size enforced), else a plain named volume (size advisory).

use super::super::loopdev::{self, LABEL_LOOP_DEVICE, LABEL_LOOP_IMAGE, LABEL_SIZE_GB};
use super::super::*;
use super::DockerExecutor;
use bollard::models::VolumeCreateRequest;
use std::collections::HashMap;
use std::path::PathBuf;

impl DockerExecutor {
    pub async fn ensure_volume(&self, spec: &MachineSpec) -> Result<VolumeInfo, ExecError> {
        let name = &spec.volume_name;
        if !loopdev::valid_volume_name(name) {
            return Err(ExecError::Failed(format!("invalid volume name {name:?}")));
        }
        let docker = self.client().await?;
        match docker.inspect_volume(name).await {
            Ok(v) => {
                let enforced = match (v.labels.get(LABEL_LOOP_IMAGE), v.options.get("device")) {
                    // Existing loop volume: its loop device may be gone after a
                    // host restart; re-attach the same device its options name.
                    (Some(image), Some(dev)) => match loopdev::ensure_attached(image.into(), dev.clone()).await {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::warn!(volume = %name, error = %e, "cannot re-attach loop device; the volume will not mount");
                            false
                        }
                    },
                    _ => false,
                };
                return Ok(volume_info(&v, enforced));
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
        let why_not = match loopdev::enabled() {
            Err(why) => why,
            Ok(()) => {
                match loopdev::provision(self.inner.volume_dir.clone(), name.clone(), spec.volume_size_gb).await {
                    Err(why) => why,
                    Ok(lv) => {
                        let image = lv.image.to_string_lossy().into_owned();
                        let mut loop_labels = labels.clone();
                        loop_labels.insert(LABEL_LOOP_DEVICE.into(), lv.device.clone());
                        loop_labels.insert(LABEL_LOOP_IMAGE.into(), image.clone());
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
                        match docker.create_volume(req).await {
                            Ok(v) => return Ok(volume_info(&v, true)),
                            Err(e) => {
                                let _ = loopdev::release(lv.image).await;
                                match self.err(e, "create volume") {
                                    e @ ExecError::Unavailable(_) => return Err(e),
                                    e => e.to_string(),
                                }
                            }
                        }
                    }
                }
            }
        };
        tracing::warn!(volume = %name, size_gb = spec.volume_size_gb, reason = %why_not,
            "loop-device volume unavailable; using a plain named volume whose size is NOT enforced");
        labels.insert("gantry.size_enforced".into(), "false".into());
        let req = VolumeCreateRequest { name: Some(name.clone()), labels: Some(labels), ..Default::default() };
        let v = docker.create_volume(req).await.map_err(|e| self.err(e, "create volume"))?;
        Ok(volume_info(&v, false))
    }

    pub async fn remove_volume(&self, name: &str) -> Result<(), ExecError> {
        let docker = self.client().await?;
        let image = match docker.inspect_volume(name).await {
            Ok(v) => v.labels.get(LABEL_LOOP_IMAGE).map(PathBuf::from),
            // Gone already; still clean up an image left by a half-done create.
            Err(e) => match self.err(e, "inspect volume") {
                ExecError::NotFound(_) if loopdev::valid_volume_name(name) => {
                    Some(loopdev::image_path(&self.inner.volume_dir, name))
                }
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
        // Only ever delete "<name>.img", whatever a label claims.
        if let Some(image) = image.filter(|p| p.file_name().is_some_and(|f| *f == *format!("{name}.img"))) {
            loopdev::release(image).await.map_err(|e| {
                ExecError::Failed(format!("volume {name} removed, but its loop device cleanup failed: {e}"))
            })?;
        }
        Ok(())
    }
}

fn volume_info(v: &bollard::models::Volume, size_enforced: bool) -> VolumeInfo {
    let mountpoint = (!v.mountpoint.is_empty()).then(|| v.mountpoint.clone());
    VolumeInfo { name: v.name.clone(), size_enforced, mountpoint }
}
