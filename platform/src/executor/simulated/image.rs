//! Snapshots on the simulated engine: a commit records the image (and makes
//! it present when the image set is restricted); removing an image a
//! container was created from is refused, as Docker refuses it.

use super::*;

/// The size a simulated commit reports.
pub const SIM_SNAPSHOT_BYTES: i64 = 64 * 1024 * 1024;

impl SimulatedExecutor {
    pub async fn commit_container(&self, id: &str, reference: &str) -> Result<ImageInfo, ExecError> {
        crate::executor::docker::split_reference(reference)?;
        let mut s = self.op("commit_container")?;
        if !s.containers.contains_key(id) {
            return Err(not_found(id));
        }
        s.committed.insert(reference.to_string(), SIM_SNAPSHOT_BYTES);
        if let Some(images) = s.images.as_mut() {
            images.insert(reference.to_string());
        }
        Ok(ImageInfo { id: format!("sha256:sim-{reference}"), size_bytes: SIM_SNAPSHOT_BYTES })
    }

    pub async fn image_info(&self, reference: &str) -> Result<Option<ImageInfo>, ExecError> {
        let s = self.state()?;
        Ok(s.committed
            .get(reference)
            .map(|size| ImageInfo { id: format!("sha256:sim-{reference}"), size_bytes: *size }))
    }

    pub async fn remove_image(&self, reference: &str) -> Result<(), ExecError> {
        let mut s = self.op("remove_image")?;
        if s.containers.values().any(|c| c.image == reference) {
            return Err(ExecError::Failed(format!("image {reference} is still used by a container")));
        }
        s.committed.remove(reference);
        if let Some(images) = s.images.as_mut() {
            images.remove(reference);
        }
        Ok(())
    }

    /// Images committed on this simulated engine (tests).
    pub fn committed_images(&self) -> Vec<String> {
        self.lock().committed.keys().cloned().collect()
    }
}
