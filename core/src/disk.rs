//! A machine's own filesystem (its container's writable layer, everything
//! outside `/data`) and the nodes' disks: the pure decisions. The platform
//! measures (the engine's `SizeRw`, a node's free space) and applies them.
//!
//! Sizes: bytes as measured, limits in MB of 1,000,000 bytes, as the
//! snapshot sizes and the engine's own figures are shown.

/// Bytes in one MB, as every size in Gantry is shown.
pub const MB: i64 = 1_000_000;
/// Bytes in one GB.
pub const GB: i64 = 1_000 * MB;
/// Share of the limit (percent) from which the owner is warned.
pub const WARN_PERCENT: i64 = 90;
/// Most MB a group limit may be set to (1 PB): well past any disk, and far
/// from overflowing a byte count.
pub const LIMIT_MB_MAX: i64 = 1_000_000_000;

/// What the watcher does with one machine's writable layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Under the warning share, or no limit.
    Ok,
    /// At or over [`WARN_PERCENT`] of the limit: the owner is told.
    Warn,
    /// Over the limit: the machine is stopped.
    Stop,
}

/// `used` bytes against a limit of `limit_mb` MB (0: no limit).
pub fn verdict(used: i64, limit_mb: i64) -> Verdict {
    if limit_mb <= 0 {
        return Verdict::Ok;
    }
    let limit = limit_mb.saturating_mul(MB);
    if used > limit {
        Verdict::Stop
    } else if used.saturating_mul(100) >= limit.saturating_mul(WARN_PERCENT) {
        Verdict::Warn
    } else {
        Verdict::Ok
    }
}

/// "1.23 GB", "20.5 MB", "512 bytes": what a person reads.
pub fn format_bytes(bytes: i64) -> String {
    if bytes >= GB {
        format!("{:.2} GB", bytes as f64 / GB as f64)
    } else if bytes >= MB {
        format!("{:.1} MB", bytes as f64 / MB as f64)
    } else {
        format!("{bytes} bytes")
    }
}

/// A limit in MB as a person reads it ("50 GB", "20 MB"); 0 is "no limit".
pub fn format_limit_mb(mb: i64) -> String {
    match mb {
        0 => "no limit".to_string(),
        mb if mb % 1000 == 0 => format!("{} GB", mb / 1000),
        mb if mb >= 1000 => format!("{:.3} GB", mb as f64 / 1000.0),
        mb => format!("{mb} MB"),
    }
}

/// The owner's warning, in the machine's history.
pub fn warning_text(used: i64, limit_mb: i64) -> String {
    format!(
        "its filesystem outside /data uses {} of its {} limit; at the limit the machine is stopped (free space, or keep files in /data)",
        format_bytes(used),
        format_limit_mb(limit_mb)
    )
}

/// How [`stopped_text`] begins.
const STOPPED_PREFIX: &str = "stopped: its filesystem outside /data used ";

/// Why the machine was stopped: its message and its history say it.
pub fn stopped_text(used: i64, limit_mb: i64) -> String {
    format!("{STOPPED_PREFIX}{} of its {} limit", format_bytes(used), format_limit_mb(limit_mb))
}

/// Whether a job's message is the disk watcher's reason for stopping it.
pub fn is_stopped_text(message: &str) -> bool {
    message.starts_with(STOPPED_PREFIX)
}

/// A size typed in GB ("50", "0.5", "0.02") as whole MB; at most three
/// decimals (one MB), between 0 and [`LIMIT_MB_MAX`] MB.
pub fn parse_gb(field: &str, text: &str) -> Result<i64, String> {
    let t = text.trim();
    let bad = || {
        format!(
            "{field}: \"{}\" is not a size in GB (a number from 0 to {}, at most three decimals)",
            t.chars().take(40).collect::<String>(),
            LIMIT_MB_MAX / 1000
        )
    };
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) || frac.len() > 3 || whole.len() > 9 {
        return Err(bad());
    }
    let whole: i64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| bad())? };
    let frac: i64 = if frac.is_empty() { 0 } else { format!("{frac:0<3}").parse().map_err(|_| bad())? };
    let mb = whole * 1000 + frac;
    if mb > LIMIT_MB_MAX {
        return Err(bad());
    }
    Ok(mb)
}

/// Why a new snapshot is refused, if it is: the group's snapshots take
/// `used` bytes of its `limit_mb` (0: no limit), and the machine has
/// written `layer` bytes outside /data, the least its image will add.
pub fn snapshot_refusal(used: i64, layer: i64, limit_mb: i64) -> Option<String> {
    let limit = limit_mb.saturating_mul(MB);
    if limit_mb <= 0 || (used < limit && used.saturating_add(layer) <= limit) {
        return None;
    }
    Some(if used >= limit {
        format!(
            "the group's snapshots take {} of its {} snapshot storage; delete one first",
            format_bytes(used),
            format_limit_mb(limit_mb)
        )
    } else {
        format!(
            "the group's snapshots take {} of its {} snapshot storage, and this machine's filesystem outside /data holds {}; delete a snapshot or files outside /data first",
            format_bytes(used),
            format_limit_mb(limit_mb),
            format_bytes(layer)
        )
    })
}

/// What the engine says of its storage (`docker info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageDriver {
    /// `Driver`: overlay2, btrfs, zfs, vfs, …
    pub driver: String,
    /// `DriverStatus`'s "Backing Filesystem" (overlay2: xfs, extfs, …).
    pub backing_fs: Option<String>,
    /// Whether the backing filesystem is known to be mounted with project
    /// quotas (`pquota`). The Engine API does not say; `None` unless a
    /// local check could tell.
    pub pquota: Option<bool>,
}

/// The `--storage-opt size=…` value for a machine with a limit of
/// `limit_mb`, when the engine enforces one; `None` when it does not (the
/// watcher then enforces it) or there is no limit. overlay2 needs xfs with
/// `pquota` (the engine refuses the option otherwise), trusted only when
/// known; btrfs and zfs take it as they are.
pub fn storage_opt_size(d: &StorageDriver, limit_mb: i64) -> Option<String> {
    if limit_mb <= 0 {
        return None;
    }
    let supported = match d.driver.as_str() {
        "btrfs" | "zfs" => true,
        "overlay2" => d.backing_fs.as_deref() == Some("xfs") && d.pquota == Some(true),
        _ => false,
    };
    // Bytes, no unit: the engine reads a bare number as bytes.
    supported.then(|| (limit_mb.saturating_mul(MB)).to_string())
}

/// A node whose free disk is below `floor_gb` takes no new machine: the
/// refusal, with the numbers; `None` when it may (unknown free space does
/// not refuse: nothing measured it).
pub fn below_floor(node: &str, free_bytes: Option<i64>, floor_gb: i64) -> Option<String> {
    let free = free_bytes?;
    (floor_gb > 0 && free < floor_gb.saturating_mul(GB))
        .then(|| format!("node {node} has {} free, below the {floor_gb} GB floor for new machines", format_bytes(free)))
}

#[cfg(test)]
mod tests;
