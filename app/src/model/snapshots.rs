//! Snapshots as the portal shows them: their sizes (the pages render the
//! platform's `SnapshotView`).

/// "1.2 GB", "64 MB", "512 kB".
pub fn size_text(bytes: i64) -> String {
    let b = bytes.max(0) as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.0} MB", b / 1e6)
    } else {
        format!("{:.0} kB", b / 1e3)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_well() {
        assert_eq!(super::size_text(1_234_000_000), "1.2 GB");
        assert_eq!(super::size_text(64 * 1024 * 1024), "67 MB");
        assert_eq!(super::size_text(2_000), "2 kB");
    }
}
