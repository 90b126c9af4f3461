//! Taking a pool image for a new volume: one `renameat2(RENAME_NOREPLACE)`
//! per try, so two racing creates never get the same file and a claim never
//! replaces an image that is already there.

use super::{parse_name, pool_dir};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Moves a ready image of `size_gb` from the pool of `volume_dir` to
/// `dest` (the new volume's `<volume dir>/<volume>.img`). `Ok(true)`: `dest`
/// now is a fresh formatted image, owned by the caller; `Ok(false)`: the
/// pool has none of that size (the caller formats one itself). Blocking.
pub fn claim(volume_dir: &Path, size_gb: i64, dest: &Path) -> Result<bool, String> {
    let dir = pool_dir(volume_dir);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(false) };
    let want = size_gb.max(0) as u64 * 1024 * 1024 * 1024;
    let mut ready: Vec<std::path::PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| e.file_name().to_str().and_then(parse_name).is_some_and(|(s, _, partial)| s == size_gb && !partial))
        .filter(|e| e.metadata().is_ok_and(|m| m.len() == want))
        .map(|e| e.path())
        .collect();
    // Racing creates start at different files, so most first tries win.
    let start = dest.as_os_str().as_bytes().iter().map(|&b| b as usize).sum::<usize>() % ready.len().max(1);
    ready.rotate_left(start);
    for image in ready {
        match rename_noreplace(&image, dest) {
            Ok(()) => {
                // The collector's age rule for unnamed images counts from
                // the claim, not from when the pool made the file.
                let stamped = std::fs::OpenOptions::new()
                    .write(true)
                    .open(dest)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()));
                if let Err(e) = stamped {
                    tracing::warn!(image = %dest.display(), "claimed volume image: cannot stamp its time: {e}");
                }
                super::run::claimed();
                return Ok(true);
            }
            // Another create took this one first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot take {} from the volume pool: {e}", image.display())),
        }
    }
    Ok(false)
}

/// `rename(from, to)` that fails with `AlreadyExists` instead of replacing `to`.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths that outlive the call.
    let rc =
        unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_NOREPLACE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
