//! A 1 GiB upload keeps the server's memory flat: the peak resident size
//! of this process (the router runs in it) during the upload, from
//! /proc/self/status, stays within 64 MiB of where it started. Alone in
//! its test binary, so no other test's memory (argon2 hashes a password
//! in 19 MiB) is counted.

use gantry_testkit::{
    datasets::{limits, pattern, pattern_sha, start},
    raw_http::raw,
};

/// This process's `field` of /proc/self/status (the server runs in it), in KiB.
fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

gantry_testkit::timed_test! {
    limit = 600;
    async fn a_one_gib_upload_keeps_the_servers_memory_flat() {
        let s = start(limits()).await;
        let total: u64 = 1 << 30;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        // Warm the path with a small upload, then measure the peak from here.
        raw(s.addr, "PUT", "/api/v1/datasets/coco/versions/v1/files/warm.bin", &auth, 4 << 20, None, pattern).await.unwrap();
        let before = status_kib("VmRSS:");
        // Resets VmHWM (the peak) to the current RSS (Linux clear_refs "5").
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let res = raw(s.addr, "PUT", "/api/v1/datasets/coco/versions/v1/files/big.bin", &auth, total, None, pattern).await.unwrap();
        let peak = status_kib("VmHWM:");
        assert_eq!(res.status, 201, "{}", res.body);
        assert!(res.body.contains(&pattern_sha(total)), "{}", res.body);
        let growth_mib = peak.saturating_sub(before) / 1024;
        println!("1 GiB upload: RSS before {} MiB, peak {} MiB, growth {growth_mib} MiB", before / 1024, peak / 1024);
        assert!(growth_mib < 64, "the server's memory grew by {growth_mib} MiB during a 1 GiB upload");
        assert_eq!(std::fs::metadata(s.central.join("coco/v1/images/big.bin")).unwrap().len(), total);
        assert_eq!(std::fs::metadata(s.region.join("coco/v1/images/big.bin")).unwrap().len(), total);
    }
}
