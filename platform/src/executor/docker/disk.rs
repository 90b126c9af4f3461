//! Disk figures from a Docker Engine: a container's writable layer
//! (`SizeRw`), the storage driver (whether it can enforce a size per
//! container), and the free space where the engine keeps its data.

use super::super::*;
use super::DockerExecutor;
use bollard::query_parameters::InspectContainerOptions;
use gantry_core::disk::StorageDriver;

impl DockerExecutor {
    /// The container's writable layer in bytes (what it wrote outside its
    /// volumes); `None` when the container is gone. The engine walks the
    /// layer to count it, so this is one call per machine per pass.
    pub async fn root_disk_bytes(&self, id: &str) -> Result<Option<i64>, ExecError> {
        let opts = InspectContainerOptions { size: true };
        match self.client().await?.inspect_container(id, Some(opts)).await {
            Ok(r) => Ok(Some(r.size_rw.unwrap_or(0))),
            Err(e) => match self.err(e, &format!("inspect container {id} with its size")) {
                ExecError::NotFound(_) => Ok(None),
                other => Err(other),
            },
        }
    }

    /// The storage driver and where the engine keeps its data; asked once
    /// (an engine does not change driver while it runs).
    pub(crate) async fn storage(&self) -> Result<&(StorageDriver, Option<String>), ExecError> {
        let docker = self.client().await?;
        self.inner
            .storage
            .get_or_try_init(|| async {
                let info = docker.info().await.map_err(|e| self.err(e, "info"))?;
                let driver = driver_of(info.driver, &info.driver_status.unwrap_or_default());
                let root = info.docker_root_dir.filter(|r| !r.is_empty());
                let driver = StorageDriver { pquota: self.local_pquota(&driver, root.as_deref()), ..driver };
                Ok((driver, root))
            })
            .await
    }

    /// overlay2 on xfs enforces a size only with project quotas, which the
    /// API does not report: for a local engine, `/proc/mounts` tells
    /// whether the filesystem holding its data root is mounted `pquota`
    /// (or `prjquota`); for a remote one nothing here can, so `None`.
    fn local_pquota(&self, d: &StorageDriver, root: Option<&str>) -> Option<bool> {
        if d.driver != "overlay2" || !self.is_local() {
            return None;
        }
        pquota_in(&std::fs::read_to_string("/proc/mounts").ok()?, root?)
    }

    /// Free and total bytes on the disk holding the engine's data root —
    /// measurable only for an engine on this host (a `unix://` socket);
    /// `None` for a remote engine, whose disk nothing here can see.
    pub async fn disk_space(&self) -> Result<Option<(i64, i64)>, ExecError> {
        if !self.is_local() {
            return Ok(None);
        }
        let Some(root) = self.storage().await?.1.clone() else { return Ok(None) };
        Ok(statvfs(&root))
    }
}

/// The driver and its "Backing Filesystem" from `docker info`.
fn driver_of(driver: Option<String>, status: &[Vec<String>]) -> StorageDriver {
    let backing_fs = status
        .iter()
        .find(|kv| kv.first().is_some_and(|k| k == "Backing Filesystem"))
        .and_then(|kv| kv.get(1).cloned());
    StorageDriver { driver: driver.unwrap_or_default(), backing_fs, pquota: None }
}

/// Whether the filesystem holding `root` is mounted with project quotas,
/// from a `/proc/mounts` text: the longest mount point holding `root` is
/// its filesystem. `None` when no mount holds it.
fn pquota_in(mounts: &str, root: &str) -> Option<bool> {
    let holds = |point: &str| root == point || root.starts_with(&format!("{}/", point.trim_end_matches('/')));
    let (_, options) = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4).then(|| (f[1], f[3]))
        })
        .filter(|(point, _)| holds(point))
        .max_by_key(|(point, _)| point.len())?;
    Some(options.split(',').any(|o| matches!(o, "pquota" | "prjquota")))
}

/// (free for unprivileged writers, total) bytes of the filesystem at `path`.
pub(crate) fn statvfs(path: &str) -> Option<(i64, i64)> {
    let c = std::ffi::CString::new(path).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let unit = s.f_frsize as i64;
    Some(((s.f_bavail as i64).saturating_mul(unit), (s.f_blocks as i64).saturating_mul(unit)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_driver_and_its_backing_filesystem_are_read_from_info() {
        let status = vec![
            vec!["Backing Filesystem".to_string(), "xfs".to_string()],
            vec!["Supports d_type".to_string(), "true".to_string()],
        ];
        let d = super::driver_of(Some("overlay2".into()), &status);
        assert_eq!((d.driver.as_str(), d.backing_fs.as_deref(), d.pquota), ("overlay2", Some("xfs"), None));
        assert_eq!(super::driver_of(Some("vfs".into()), &[]).backing_fs, None);
    }

    #[test]
    fn project_quotas_are_read_from_the_mount_holding_the_data_root() {
        let mounts = "/dev/vda1 / ext4 rw,relatime 0 0\n\
                      /dev/vdb /var/lib/docker xfs rw,relatime,attr2,inode64,prjquota 0 0\n\
                      /dev/vdc /srv xfs rw,relatime 0 0\n";
        assert_eq!(super::pquota_in(mounts, "/var/lib/docker"), Some(true));
        assert_eq!(super::pquota_in(mounts, "/var/lib/docker/overlay2"), Some(true));
        assert_eq!(super::pquota_in(mounts, "/srv/docker"), Some(false));
        assert_eq!(super::pquota_in(mounts, "/var/lib/dockerx"), Some(false), "held by /, not by /var/lib/docker");
        assert_eq!(super::pquota_in("", "/var/lib/docker"), None);
    }

    #[test]
    fn statvfs_reads_this_hosts_disk() {
        let (free, total) = super::statvfs("/").expect("/ has a filesystem");
        assert!(total > 0 && free <= total, "{free} of {total}");
        assert_eq!(super::statvfs("/no/such/path"), None);
    }
}
