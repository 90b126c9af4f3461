//! Disk figures of the simulated engine, set by tests: what a container
//! has written outside its volumes, and the node's free space.

use super::*;

impl SimulatedExecutor {
    /// Pretends container `id` has written `bytes` outside its volumes.
    pub fn set_root_disk_bytes(&self, id: &str, bytes: i64) {
        self.lock().root_disk.insert(id.to_string(), bytes);
    }

    /// The node's (free, total) bytes; `None` (the default): unknown, as
    /// for an engine nothing here can measure.
    pub fn set_disk_space(&self, space: Option<(i64, i64)>) {
        self.lock().disk_space = space;
    }

    pub async fn root_disk_bytes(&self, id: &str) -> Result<Option<i64>, ExecError> {
        let s = self.op("root_disk_bytes")?;
        Ok(s.containers.contains_key(id).then(|| s.root_disk.get(id).copied().unwrap_or(0)))
    }

    pub async fn disk_space(&self) -> Result<Option<(i64, i64)>, ExecError> {
        Ok(self.op("disk_space")?.disk_space)
    }
}
