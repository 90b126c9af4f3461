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
    /// The image was made by this call (empty). False: it already existed
    /// and holds data (a kept volume whose Docker volume went, an
    /// interrupted create), so a failed create must leave it alone.
    pub fresh: bool,
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

/// `^/dev/loop[0-9]+$`: the only device paths ever handed to `losetup`, so
/// a label cannot smuggle in an option (`-D` would detach every device) or
/// another disk.
pub fn valid_device(dev: &str) -> bool {
    dev.strip_prefix("/dev/loop")
        .is_some_and(|n| !n.is_empty() && n.len() <= 6 && n.bytes().all(|b| b.is_ascii_digit()))
}

pub fn image_path(dir: &Path, volume: &str) -> PathBuf {
    dir.join(format!("{volume}.img"))
}

/// The image file named by a volume label, accepted only if it is exactly
/// `<dir>/<volume>.img`.
pub fn checked_image(dir: &Path, volume: &str, labelled: &str) -> Result<PathBuf, String> {
    let expected = image_path(dir, volume);
    if valid_volume_name(volume) && Path::new(labelled) == expected {
        Ok(expected)
    } else {
        Err(format!("volume {volume}: image {labelled:?} is not {} — refusing to touch it", expected.display()))
    }
}

/// Makes sure `<dir>/<volume>.img` exists, is formatted and attached.
/// An existing image is never reformatted (it holds a machine's data: this
/// is the re-attach path after a host restart or an interrupted create). A
/// new image is formatted under a temporary name and renamed into place, so
/// a crash during `mkfs` never leaves an unformatted image that looks done.
pub async fn provision(dir: PathBuf, volume: String, size_gb: i64) -> Result<LoopVolume, String> {
    provision_avoiding(dir, volume, size_gb, Vec::new()).await
}

/// [`provision`], never attaching to a device in `recorded`: the devices
/// other Docker volumes name. After a host reboot every device is free,
/// but a stopped machine's volume still names its old one, and the engine
/// mounts that device whenever it touches the container (start, the
/// archive API): handing it to a new image would show that image's data
/// to the other machine's owner.
pub async fn provision_avoiding(
    dir: PathBuf,
    volume: String,
    size_gb: i64,
    recorded: Vec<String>,
) -> Result<LoopVolume, String> {
    blocking(move || {
        if size_gb <= 0 {
            return Err(format!("volume size must be positive, got {size_gb} GB"));
        }
        if !valid_volume_name(&volume) {
            return Err(format!("invalid volume name {volume:?}"));
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let image = image_path(&dir, &volume);
        let fresh = !image.exists();
        // A pre-formatted image from the node's pool, if it has one of this
        // size: no `mkfs` on the create's path (see `volume_pool`).
        let pooled = fresh
            && crate::volume_pool::claim(&dir, size_gb, &image)
                .inspect_err(|why| tracing::warn!(volume = %volume, "{why}; formatting a new image instead"))
                .unwrap_or(false);
        if fresh && !pooled {
            let temp = dir.join(format!("{volume}.img.partial"));
            let setup = || -> Result<(), String> {
                // set_len on a new file == `truncate -s NG`: sparse, no data written.
                // Its owner's only: it holds the machine's /data.
                let f = {
                    use std::os::unix::fs::OpenOptionsExt;
                    std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temp)
                }
                .map_err(|e| format!("cannot create {}: {e}", temp.display()))?;
                f.set_len(size_gb as u64 * 1024 * 1024 * 1024).map_err(|e| format!("cannot size image: {e}"))?;
                run("mkfs.ext4", &["-q", "-F", "--", path_str(&temp)?])?;
                f.sync_all().map_err(|e| format!("cannot sync {}: {e}", temp.display()))?;
                std::fs::rename(&temp, &image).map_err(|e| format!("cannot rename {}: {e}", temp.display()))
            };
            if let Err(e) = setup() {
                let _ = std::fs::remove_file(&temp);
                return Err(e);
            }
        }
        let attached = attached_devices(&image)?;
        let device = match attached.iter().find(|d| !recorded.contains(d)) {
            Some(dev) => dev.clone(),
            None if !attached.is_empty() => {
                return Err(format!("{} is attached only to {attached:?}, which other volumes name", image.display()));
            }
            None => match attach_unrecorded(&image, &recorded) {
                Ok(dev) => dev,
                Err(e) => {
                    if fresh {
                        let _ = std::fs::remove_file(&image);
                    }
                    return Err(e);
                }
            },
        };
        Ok(LoopVolume { device, image, fresh })
    })
    .await
}

/// How many taken devices `attach_unrecorded` steps over before it gives
/// up: each one means another attach won the race for it.
const ATTACH_TRIES: usize = 64;

/// Attaches `image` to the lowest-numbered device that is free and not in
/// `recorded`. `losetup DEVICE FILE` fails when DEVICE was taken since we
/// looked (another create on this node), and then the next one is tried;
/// it also creates a device node that does not exist yet.
fn attach_unrecorded(image: &Path, recorded: &[String]) -> Result<String, String> {
    // One attach at a time in this process: concurrent creates all chose
    // the same lowest free device, and all but one lost and listed again —
    // a storm of `losetup` runs that cost a 20-machine burst about a second.
    // Other processes sharing the node are still met by the retry below.
    static ATTACH: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ATTACH.lock().unwrap_or_else(|e| e.into_inner());
    let mut skip: Vec<String> = recorded.to_vec();
    let mut last_error = String::new();
    for _ in 0..ATTACH_TRIES {
        let in_use = run("losetup", &["--list", "--noheadings", "--output", "NAME"])?;
        let in_use: Vec<&str> = in_use.lines().map(str::trim).collect();
        let device = (0..1_000_000u32)
            .map(|k| format!("/dev/loop{k}"))
            .find(|d| !in_use.contains(&d.as_str()) && !skip.contains(d))
            .ok_or("no free loop device")?;
        match run("losetup", &["--", &device, path_str(image)?]) {
            Ok(_) => return Ok(device),
            // Taken meanwhile: try the next. Still free: the failure is
            // about the image or the host, and the next device would fail too.
            Err(e) if is_attached(&device) => last_error = e,
            Err(e) => return Err(e),
        }
        skip.push(device);
    }
    Err(format!("no loop device could be attached after {ATTACH_TRIES} tries: {last_error}"))
}

fn is_attached(device: &str) -> bool {
    run("losetup", &["--list", "--noheadings", "--output", "BACK-FILE", "--", device])
        .is_ok_and(|b| !b.trim().is_empty())
}

/// Before every start: `device` (recorded in the Docker volume) must be
/// backed by `image`. Attached elsewhere or free after a host reboot, it
/// is re-attached when free; a device that now holds another file is an
/// error, never a mount (Linux would let a second mount of that disk happen).
pub async fn ensure_attached(image: PathBuf, device: String) -> Result<(), String> {
    blocking(move || {
        if !valid_device(&device) {
            return Err(format!("recorded loop device {device:?} is not a loop device path"));
        }
        if !image.is_file() {
            return Err(format!("volume image {} is missing", image.display()));
        }
        if attached_devices(&image)?.contains(&device) {
            return Ok(());
        }
        let backing =
            run("losetup", &["--list", "--noheadings", "--output", "BACK-FILE", "--", &device]).unwrap_or_default();
        let backing = backing.trim();
        if !backing.is_empty() {
            return Err(format!(
                "{device} now holds {backing}, not {}; refusing to mount it (re-create the volume or free the device)",
                image.display()
            ));
        }
        run("losetup", &["--", &device, path_str(&image)?]).map(|_| ())
    })
    .await
}

/// Detaches every loop device backed by `image` and deletes the file;
/// returns the devices detached. A missing image is fine (idempotent delete).
pub async fn release(image: PathBuf) -> Result<Vec<String>, String> {
    blocking(move || {
        let _ = std::fs::remove_file(image.with_extension("img.partial"));
        if !image.exists() {
            return Ok(Vec::new());
        }
        let devices = attached_devices(&image)?;
        for dev in &devices {
            run("losetup", &[&format!("--detach={dev}")])?;
        }
        std::fs::remove_file(&image).map_err(|e| format!("cannot delete {}: {e}", image.display()))?;
        Ok(devices)
    })
    .await
}

/// How old a file in the volume directory must be before a sweep may
/// remove it: a create on another server sharing the node may be making
/// it right now (the same rule as for `*.img.partial` at start-up).
pub const SWEEP_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// The volume name of `<volume>.img` if it is named exactly as Gantry
/// names a machine's data volume in installation `instance`
/// (`gantry-<instance>-m<id>-data.img`, see `machines::volume_name`).
pub fn gantry_image_volume<'a>(file_name: &'a str, instance: &str) -> Option<&'a str> {
    let volume = file_name.strip_suffix(".img")?;
    let id = volume.strip_prefix("gantry-")?.strip_prefix(instance)?.strip_prefix("-m")?.strip_suffix("-data")?;
    let plain_id = !id.is_empty() && id.len() <= 19 && id.bytes().all(|b| b.is_ascii_digit());
    (plain_id && !instance.is_empty() && valid_volume_name(volume)).then_some(volume)
}

/// Volume names of the block images in `dir` that the collector may
/// consider: regular files named as Gantry names them (installation
/// `instance`), last modified at least `min_age` ago. Whether anything
/// still names them is the caller's to check.
pub fn old_images(dir: &Path, instance: &str, min_age: std::time::Duration) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|a| a >= min_age)))
        .filter_map(|e| gantry_image_volume(e.file_name().to_str()?, instance).map(String::from))
        .collect()
}

/// Leftover `*.img.partial` files of creates that died during `mkfs`, at
/// least `min_age` old (a replica sharing the directory may be formatting
/// one right now).
pub fn remove_partials(dir: &Path, min_age: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let old = |e: &std::fs::DirEntry| {
        e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|a| a >= min_age))
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".img.partial") && old(e))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// `losetup --associated=FILE` prints "/dev/loop0: [..]:inode (FILE)" per
/// device; anything that is not a loop device path is ignored.
pub fn attached_devices(image: &Path) -> Result<Vec<String>, String> {
    let out = run("losetup", &[&format!("--associated={}", path_str(image)?)])?;
    Ok(out.lines().filter_map(|l| l.split(':').next()).filter(|d| valid_device(d)).map(String::from).collect())
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
    fn device_paths() {
        assert!(valid_device("/dev/loop0") && valid_device("/dev/loop127"));
        for bad in ["-D", "/dev/loop", "/dev/sda", "/dev/loop1 ", "/dev/loop1/../sda", "/dev/loopx", "--detach-all"] {
            assert!(!valid_device(bad), "{bad}");
        }
    }

    #[test]
    fn images_stay_in_the_volume_dir() {
        let dir = Path::new("/var/lib/gantry/volumes");
        assert!(checked_image(dir, "gantry-a-m1-data", "/var/lib/gantry/volumes/gantry-a-m1-data.img").is_ok());
        assert!(checked_image(dir, "gantry-a-m1-data", "/etc/shadow").is_err());
        assert!(checked_image(dir, "gantry-a-m1-data", "/var/lib/gantry/volumes/../x/gantry-a-m1-data.img").is_err());
        assert!(checked_image(dir, "../x", "/var/lib/gantry/x.img").is_err());
    }

    #[test]
    fn gantry_image_names() {
        assert_eq!(gantry_image_volume("gantry-ab12-m7-data.img", "ab12"), Some("gantry-ab12-m7-data"));
        for other in [
            "gantry-ab12-m7-data.img.partial",
            "gantry-ab12-m7-data",
            "gantry-zz99-m7-data.img",
            "gantry-ab12-m-data.img",
            "gantry-ab12-mx-data.img",
            "gantry-ab12-m7-data-x.img",
            "gantry-ab12-m7-1-data.img",
            "notes.img",
        ] {
            assert_eq!(gantry_image_volume(other, "ab12"), None, "{other}");
        }
        assert_eq!(gantry_image_volume("gantry--m7-data.img", ""), None);
    }

    #[test]
    fn volume_names() {
        assert!(valid_volume_name("gantry-v12_a.b"));
        assert!(!valid_volume_name("../etc"));
        assert!(!valid_volume_name(".hidden"));
        assert!(!valid_volume_name("a/b"));
        assert!(!valid_volume_name(""));
    }
}
