//! The byte quota of a group's datasets.

use thiserror::Error;

/// Why an upload does not fit: the numbers a person needs to act.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("group {group} holds {} of its {} dataset quota{}; this file needs {} more", format_bytes(*.used), format_bytes(*.quota), reserved_note(*.reserved), format_bytes(*.incoming))]
pub struct QuotaRefusal {
    pub group: String,
    pub quota: u64,
    pub used: u64,
    /// Bytes promised to other uploads still in progress.
    pub reserved: u64,
    pub incoming: u64,
}

fn reserved_note(reserved: u64) -> String {
    if reserved == 0 {
        String::new()
    } else {
        format!(" (and {} reserved by uploads in progress)", format_bytes(reserved))
    }
}

/// `used + reserved + incoming <= quota`, without overflow. `incoming` is
/// the growth (a replaced file's old size already subtracted).
pub fn check_quota(group: &str, quota: u64, used: u64, reserved: u64, incoming: u64) -> Result<(), QuotaRefusal> {
    let after = used.checked_add(reserved).and_then(|n| n.checked_add(incoming));
    if after.is_some_and(|after| after <= quota) {
        Ok(())
    } else {
        Err(QuotaRefusal { group: group.to_string(), quota, used, reserved, incoming })
    }
}

/// `1536` → `1.5 KiB`; exact byte counts below 1 KiB.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
