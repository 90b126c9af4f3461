//! Size-enforced data volumes (PRODUCT A8, DESIGN "Block devices"): a sparse
//! ext4 image file attached to a loop device, which a Docker `local` volume
//! then mounts (`type=ext4, device=/dev/loopN`). Everything here shells out
//! to util-linux/e2fsprogs on a blocking thread (the workspace's tokio has no
//! `process` feature, and these calls are rare and short).
//!
//! Any failure is returned as a message; the caller falls back to a plain
//! named volume and says the size is not enforced.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Volume labels recording the backing, read back by `remove_volume` and by
/// a reconciler re-attaching after a host restart.
pub const LABEL_LOOP_DEVICE: &str = "gantry.loop.device";
pub const LABEL_LOOP_IMAGE: &str = "gantry.loop.image";
pub const LABEL_SIZE_GB: &str = "gantry.size_gb";

/// Default directory holding the image files.
pub const DEFAULT_VOLUME_DIR: &str = "/var/lib/gantry/volumes";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopVolume {
    pub device: String,
    pub image: PathBuf,
}

/// Whether to try loop volumes at all: root (losetup needs it), the tools on
/// PATH, and not switched off with `GANTRY_LOOP_VOLUMES=0`.
pub fn enabled() -> Result<(), String> {
    if std::env::var("GANTRY_LOOP_VOLUMES").as_deref() == Ok("0") {
        return Err("disabled by GANTRY_LOOP_VOLUMES=0".into());
    }
    if effective_uid() != Some(0) {
        return Err("not running as root".into());
    }
    for tool in ["losetup", "mkfs.ext4"] {
        if !on_path(tool) {
            return Err(format!("`{tool}` not found on PATH"));
        }
    }
    Ok(())
}

/// Docker's own rule for volume names; also keeps the image path inside
/// the volume directory (no `/`, no leading dot).
pub fn valid_volume_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

pub fn image_path(dir: &Path, volume: &str) -> PathBuf {
    dir.join(format!("{volume}.img"))
}

/// Makes sure `<dir>/<volume>.img` exists, is formatted and attached.
/// An existing image is never reformatted (it holds a machine's data: this
/// is the re-attach path after a host restart or an interrupted create).
pub async fn provision(dir: PathBuf, volume: String, size_gb: i64) -> Result<LoopVolume, String> {
    blocking(move || {
        if size_gb <= 0 {
            return Err(format!("volume size must be positive, got {size_gb} GB"));
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let image = image_path(&dir, &volume);
        let fresh = !image.exists();
        if fresh {
            let setup = || -> Result<(), String> {
                // set_len on a new file == `truncate -s NG`: sparse, no data written.
                let f = std::fs::File::create(&image).map_err(|e| format!("cannot create {}: {e}", image.display()))?;
                f.set_len(size_gb as u64 * 1024 * 1024 * 1024).map_err(|e| format!("cannot size image: {e}"))?;
                run("mkfs.ext4", &["-q", "-F", path_str(&image)?])?;
                Ok(())
            };
            if let Err(e) = setup() {
                let _ = std::fs::remove_file(&image);
                return Err(e);
            }
        }
        let device = match attached_devices(&image)?.into_iter().next() {
            Some(dev) => dev,
            None => match run("losetup", &["-f", "--show", path_str(&image)?]) {
                Ok(out) => out.trim().to_string(),
                Err(e) => {
                    if fresh {
                        let _ = std::fs::remove_file(&image);
                    }
                    return Err(e);
                }
            },
        };
        Ok(LoopVolume { device, image })
    })
    .await
}

/// Re-attaches `image` to exactly `device` (the one recorded in the Docker
/// volume's options) if it is not attached there already.
pub async fn ensure_attached(image: PathBuf, device: String) -> Result<(), String> {
    blocking(move || {
        if attached_devices(&image)?.contains(&device) {
            return Ok(());
        }
        run("losetup", &[&device, path_str(&image)?]).map(|_| ())
    })
    .await
}

/// Detaches every loop device backed by `image` and deletes the file.
/// A missing image is fine (idempotent delete).
pub async fn release(image: PathBuf) -> Result<(), String> {
    blocking(move || {
        if !image.exists() {
            return Ok(());
        }
        for dev in attached_devices(&image)? {
            run("losetup", &["-d", &dev])?;
        }
        std::fs::remove_file(&image).map_err(|e| format!("cannot delete {}: {e}", image.display()))
    })
    .await
}

/// `losetup -j FILE` prints "/dev/loop0: [..]:inode (FILE)" per device.
fn attached_devices(image: &Path) -> Result<Vec<String>, String> {
    let out = run("losetup", &["-j", path_str(image)?])?;
    Ok(out.lines().filter_map(|l| l.split(':').next()).filter(|d| d.starts_with("/dev/")).map(String::from).collect())
}

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("cannot run {program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str().ok_or_else(|| format!("non-UTF-8 path {}", p.display()))
}

fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(tool).is_file())
}

/// Effective uid from /proc (avoids a libc dependency just for geteuid).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f).await.map_err(|e| format!("worker thread failed: {e}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_names() {
        assert!(valid_volume_name("gantry-v12_a.b"));
        assert!(!valid_volume_name("../etc"));
        assert!(!valid_volume_name(".hidden"));
        assert!(!valid_volume_name("a/b"));
        assert!(!valid_volume_name(""));
    }
}
