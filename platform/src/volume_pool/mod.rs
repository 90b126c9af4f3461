//! The per-node pool of pre-formatted data-volume images (issue 35 part 4):
//! `mkfs` of a machine's block volume used to run on its create's critical
//! path; now a background loop keeps a few fresh, formatted, sparse images
//! of each size class in `<volume dir>/pool/`, and a create whose volume is
//! new takes one with a single `rename(2)` into its place
//! (`<volume dir>/<volume>.img`) and only attaches it. An empty pool (or a
//! size no class has) falls back to formatting on the spot.
//!
//! - **Never handed out twice**: the claim is `renameat2(RENAME_NOREPLACE)`
//!   of the pool file; of two creates racing for one file exactly one rename
//!   succeeds, the other sees `ENOENT` and tries the next file. It never
//!   replaces an existing image (a kept volume's data).
//! - **No half-done state**: an image enters the pool only after `mkfs` and
//!   `fsync`, by renaming `<name>.img.partial`; a partial whose maker died
//!   (its pid is in the name) is deleted by the next pass. A claimed image is
//!   the volume's own image at once: a create that dies after the claim
//!   finds it on its retry (as it would find an image it formatted itself),
//!   and the collector deletes it if the machine is gone (the claim stamps
//!   its mtime, so the collector's 10-minute age rule counts from the claim).
//! - **Never attached while pooled**: a pool image is a plain file; the loop
//!   device is attached by the create that claims it. Nothing needs
//!   detaching at shutdown, and the pool is kept across restarts on purpose
//!   (its images are ready for the next start's creates).
//! - **Bounded**: per class `per_class` images, and all pool files together
//!   at most `budget_bytes` of allocated disk (see
//!   [`gantry_core::volume_pool::next_to_make`]).
//!
//! Block volumes (and so the pool) exist only where the engine is on this
//! host (`unix://`): a remote node gets plain Docker volumes, with no `mkfs`.

mod claim;
mod fill;
mod run;

pub use claim::claim;
pub use fill::{fill, fill_one, images, sweep, PoolImage};
pub use run::{run, run_until};

use std::path::{Path, PathBuf};

/// The pool's settings for one node's volume directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// The node's block-volume directory; the pool is its `pool/` subfolder
    /// (the same filesystem, so a claim is one rename).
    pub volume_dir: PathBuf,
    /// Size classes in GB (the sizes machines are created with).
    pub classes: Vec<i64>,
    /// Ready images kept per class; 0 turns the pool off.
    pub per_class: usize,
    /// Allocated disk all pool files together may take; 0 turns it off.
    pub budget_bytes: u64,
}

impl PoolConfig {
    pub fn enabled(&self) -> bool {
        self.per_class > 0 && self.budget_bytes > 0 && !self.classes.is_empty()
    }
}

/// `<volume dir>/pool`.
pub fn pool_dir(volume_dir: &Path) -> PathBuf {
    volume_dir.join("pool")
}

/// `<size>g-<pid>-<serial>.img`: the class and the maker, so a claim picks
/// its size by name and a sweep can tell a dead maker's partial.
fn image_name(size_gb: i64, pid: u32, serial: u64) -> String {
    format!("{size_gb}g-{pid}-{serial}.img")
}

/// (size, maker pid) of a pool file named by [`image_name`], with or
/// without `.partial`; `None` for anything else (never touched).
fn parse_name(name: &str) -> Option<(i64, u32, bool)> {
    let (stem, partial) = match name.strip_suffix(".img.partial") {
        Some(s) => (s, true),
        None => (name.strip_suffix(".img")?, false),
    };
    let mut parts = stem.splitn(3, '-');
    let size = parts.next()?.strip_suffix('g')?;
    let (pid, serial) = (parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(size) && digits(pid) && digits(serial)) {
        return None;
    }
    Some((size.parse().ok()?, pid.parse().ok()?, partial))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        assert_eq!(parse_name(&image_name(10, 42, 7)), Some((10, 42, false)));
        assert_eq!(parse_name("10g-42-7.img.partial"), Some((10, 42, true)));
        for other in
            ["gantry-a-m1-data.img", "10g-42.img", "10-42-7.img", "xg-1-2.img", "10g-4-2-1.img", "10g-1-2.imgx"]
        {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }
}
