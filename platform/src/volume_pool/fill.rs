//! Making pool images, and the sweep that removes what a dead maker left.
//! Everything here is blocking (files and `mkfs.ext4`); the loop in
//! [`super::run`] calls it on a blocking thread, one image at a time.

use super::{image_name, parse_name, pool_dir, PoolConfig};
use gantry_core::volume_pool::{next_to_make, Class};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One file in the pool directory, as its name and metadata say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolImage {
    pub path: PathBuf,
    pub size_gb: i64,
    /// Still being formatted (`.img.partial`): never claimed.
    pub partial: bool,
    pub maker_pid: u32,
    /// Allocated disk (`du`), what the budget counts.
    pub allocated: u64,
}

/// Every pool file (ready or partial), in name order.
pub fn images(volume_dir: &Path) -> Vec<PoolImage> {
    let Ok(entries) = std::fs::read_dir(pool_dir(volume_dir)) else { return Vec::new() };
    let mut out: Vec<PoolImage> = entries
        .flatten()
        .filter_map(|e| {
            let (size_gb, maker_pid, partial) = parse_name(e.file_name().to_str()?)?;
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            Some(PoolImage { path: e.path(), size_gb, partial, maker_pid, allocated: meta.blocks() * 512 })
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Deletes partials whose maker is gone (no such process) or that are over
/// ten minutes old and not this process's, and ready images of sizes that
/// are no longer a class. Returns how many files went.
pub fn sweep(cfg: &PoolConfig) -> usize {
    let me = std::process::id();
    let stale = |i: &PoolImage| {
        let old = std::fs::metadata(&i.path)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|a| a >= crate::executor::loopdev::SWEEP_MIN_AGE));
        if i.partial {
            i.maker_pid != me && (!Path::new(&format!("/proc/{}", i.maker_pid)).exists() || old)
        } else {
            !cfg.classes.contains(&i.size_gb)
        }
    };
    images(&cfg.volume_dir).into_iter().filter(stale).filter(|i| std::fs::remove_file(&i.path).is_ok()).count()
}

/// Disk one image of each size took when this process last made one.
static MEASURED: Mutex<Option<HashMap<i64, u64>>> = Mutex::new(None);
static SERIAL: AtomicU64 = AtomicU64::new(0);

/// Makes the one image the pool lacks most, if any fits: `Ok(Some(size))`
/// when one was added, `Ok(None)` when the pool is full (or off, or at its
/// budget). An image that turns out not to fit the budget is deleted.
pub fn fill_one(cfg: &PoolConfig) -> Result<Option<i64>, String> {
    if !cfg.enabled() {
        return Ok(None);
    }
    let now = images(&cfg.volume_dir);
    let used: u64 = now.iter().map(|i| i.allocated).sum();
    let measured = MEASURED.lock().expect("pool lock").clone().unwrap_or_default();
    let classes: Vec<Class> = cfg
        .classes
        .iter()
        .map(|&size_gb| {
            let of_size = now.iter().filter(|i| i.size_gb == size_gb && !i.partial);
            let seen = of_size.clone().map(|i| i.allocated).max();
            Class { size_gb, ready: of_size.count(), bytes_each: seen.or(measured.get(&size_gb).copied()) }
        })
        .collect();
    let Some(size_gb) = next_to_make(&classes, cfg.per_class, used, cfg.budget_bytes) else { return Ok(None) };
    let image = make(&pool_dir(&cfg.volume_dir), size_gb)?;
    let took = std::fs::metadata(&image).map(|m| m.blocks() * 512).unwrap_or(0);
    MEASURED.lock().expect("pool lock").get_or_insert_with(HashMap::new).insert(size_gb, took);
    if used + took > cfg.budget_bytes {
        let _ = std::fs::remove_file(&image);
        return Ok(None);
    }
    Ok(Some(size_gb))
}

/// [`fill_one`] until the pool is full; returns how many were made.
pub fn fill(cfg: &PoolConfig) -> Result<usize, String> {
    if !cfg.enabled() {
        return Ok(0);
    }
    std::fs::create_dir_all(&cfg.volume_dir).map_err(|e| format!("cannot create {}: {e}", cfg.volume_dir.display()))?;
    let mut made = 0;
    while fill_one(cfg)?.is_some() {
        made += 1;
    }
    Ok(made)
}

/// A sparse `size_gb` file, formatted ext4 and synced under its partial
/// name, then renamed ready: a crash never leaves a ready-looking image
/// that is not formatted.
fn make(dir: &Path, size_gb: i64) -> Result<PathBuf, String> {
    // Not `create_dir_all`: a volume directory removed under a running
    // loop (a test's, the bench's) is not made again.
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(format!("cannot create {}: {e}", dir.display()))
        }
        _ => {}
    }
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let ready = dir.join(image_name(size_gb, std::process::id(), stamp.wrapping_add(serial)));
    let partial = ready.with_extension("img.partial");
    let setup = || -> Result<(), String> {
        // Its future owner's only, as a volume made on the spot is.
        let f = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&partial)
        }
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
        f.set_len(size_gb as u64 * 1024 * 1024 * 1024).map_err(|e| format!("cannot size pool image: {e}"))?;
        // Background work: at the lowest CPU priority, behind any create.
        let out = Command::new("nice")
            .args(["-n", "19", "mkfs.ext4", "-q", "-F", "--"])
            .arg(&partial)
            .output()
            .map_err(|e| format!("cannot run nice mkfs.ext4: {e}"))?;
        if !out.status.success() {
            return Err(format!("mkfs.ext4 failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        f.sync_all().map_err(|e| format!("cannot sync {}: {e}", partial.display()))?;
        std::fs::rename(&partial, &ready).map_err(|e| format!("cannot rename {}: {e}", partial.display()))
    };
    setup().inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })?;
    Ok(ready)
}
