use super::*;

#[test]
fn verdicts_follow_the_limit_and_the_warning_share() {
    assert_eq!(verdict(10 * GB, 0), Verdict::Ok, "0 is no limit");
    assert_eq!(verdict(0, 20), Verdict::Ok);
    assert_eq!(verdict(17 * MB, 20), Verdict::Ok);
    assert_eq!(verdict(18 * MB, 20), Verdict::Warn, "90 % warns");
    assert_eq!(verdict(20 * MB, 20), Verdict::Warn, "at the limit is not over it");
    assert_eq!(verdict(20 * MB + 1, 20), Verdict::Stop);
    assert_eq!(verdict(i64::MAX, LIMIT_MB_MAX), Verdict::Stop, "no overflow");
}

#[test]
fn sizes_read_as_people_read_them() {
    assert_eq!(format_bytes(31_457_280), "31.5 MB");
    assert_eq!(format_bytes(2 * GB), "2.00 GB");
    assert_eq!(format_bytes(12), "12 bytes");
    assert_eq!(format_limit_mb(50_000), "50 GB");
    assert_eq!(format_limit_mb(20), "20 MB");
    assert_eq!(format_limit_mb(1_500), "1.500 GB");
    assert_eq!(format_limit_mb(0), "no limit");
    assert_eq!(stopped_text(30 * MB, 20), "stopped: its filesystem outside /data used 30.0 MB of its 20 MB limit");
    assert!(is_stopped_text(&stopped_text(1, 1)));
    assert!(!is_stopped_text("exited with code 1"));
}

#[test]
fn gb_fields_take_up_to_three_decimals() {
    assert_eq!(parse_gb("f", "50"), Ok(50_000));
    assert_eq!(parse_gb("f", " 0.02 "), Ok(20));
    assert_eq!(parse_gb("f", "1.5"), Ok(1_500));
    assert_eq!(parse_gb("f", ".5"), Ok(500));
    assert_eq!(parse_gb("f", "0"), Ok(0));
    assert_eq!(parse_gb("f", "1000000"), Ok(LIMIT_MB_MAX));
    for bad in ["", ".", "-1", "1e3", "0.0001", "1000001", "abc", "99999999999999999999", "1,5", "+3"] {
        let e = parse_gb("root filesystem", bad).unwrap_err();
        assert!(e.starts_with("root filesystem: "), "{bad}: {e}");
    }
}

#[test]
fn storage_opt_only_where_the_driver_enforces_it() {
    let d = |driver: &str, fs: Option<&str>, pquota: Option<bool>| StorageDriver {
        driver: driver.into(),
        backing_fs: fs.map(Into::into),
        pquota,
    };
    assert_eq!(storage_opt_size(&d("btrfs", None, None), 20), Some("20000000".into()));
    assert_eq!(storage_opt_size(&d("zfs", None, None), 1), Some("1000000".into()));
    assert_eq!(storage_opt_size(&d("overlay2", Some("xfs"), Some(true)), 50_000), Some("50000000000".into()));
    assert_eq!(storage_opt_size(&d("overlay2", Some("xfs"), None), 20), None, "pquota not known");
    assert_eq!(storage_opt_size(&d("overlay2", Some("extfs"), Some(true)), 20), None);
    assert_eq!(storage_opt_size(&d("vfs", Some("extfs"), None), 20), None);
    assert_eq!(storage_opt_size(&d("btrfs", None, None), 0), None, "no limit, no option");
}

#[test]
fn a_node_below_the_floor_is_refused_with_the_numbers() {
    assert_eq!(
        below_floor("gpu-1", Some(3_200 * MB), 10).as_deref(),
        Some("node gpu-1 has 3.20 GB free, below the 10 GB floor for new machines")
    );
    assert_eq!(below_floor("gpu-1", Some(10 * GB), 10), None);
    assert_eq!(below_floor("gpu-1", None, 10), None, "unknown free space does not refuse");
    assert_eq!(below_floor("gpu-1", Some(0), 0), None, "floor 0 is off");
}

#[test]
fn snapshots_are_refused_at_the_limit_or_when_the_machines_layer_would_cross_it() {
    assert_eq!(snapshot_refusal(10 * MB, 10 * MB, 0), None, "no limit");
    assert_eq!(snapshot_refusal(50 * MB, 10 * MB, 100), None);
    assert_eq!(snapshot_refusal(99 * MB, 0, 100), None, "under the limit, nothing measured: the next is refused");
    assert_eq!(
        snapshot_refusal(100 * MB, 0, 100).as_deref(),
        Some("the group's snapshots take 100.0 MB of its 100 MB snapshot storage; delete one first")
    );
    assert_eq!(
        snapshot_refusal(50 * MB, 60 * MB, 100).as_deref(),
        Some("the group's snapshots take 50.0 MB of its 100 MB snapshot storage, and this machine's filesystem outside /data holds 60.0 MB; delete a snapshot or files outside /data first")
    );
}
