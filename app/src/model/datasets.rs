//! How the dataset pages and the upload island word datasets and where
//! they link: labels, URLs, the upload's fingerprint. Pure, and compiled to
//! wasm for the island (the pages render the platform's views).

/// "100 B of 600 B", or what is known of it.
pub fn held_label(held: Option<u64>, total: Option<u64>) -> String {
    use gantry_core::datasets::format_bytes;
    match (held, total) {
        (Some(h), Some(t)) => format!("{} of {}", format_bytes(h), format_bytes(t)),
        (Some(h), None) => format!("{} (length not declared)", format_bytes(h)),
        (None, Some(t)) => format!("unknown of {}", format_bytes(t)),
        (None, None) => "unknown".to_string(),
    }
}

/// Where the page's script sends one file (the session's streamed upload).
pub fn upload_url(code: &str, version: &str, name: &str, replace: bool) -> String {
    let mut url = format!("/datasets/{}/{}/upload?name={}", encode(code), encode(version), encode(name));
    if replace {
        url.push_str("&replace=1");
    }
    url
}

/// A file's resumable upload in the JSON API (the page's session signs it).
pub fn resumable_url(code: &str, version: &str, name: &str) -> String {
    format!("/api/v1/datasets/{}/versions/{}/uploads/{}", encode(code), encode(version), encode(name))
}

/// The most the upload page sends in one request: a dropped connection
/// costs at most this much again.
pub const RESUMABLE_CHUNK_BYTES: f64 = (32u64 << 20) as f64;

/// How many bytes of each end of a file its fingerprint reads.
pub const FINGERPRINT_SAMPLE_BYTES: f64 = (64u64 << 10) as f64;

/// What the upload page calls the file it sends (`X-Gantry-Fingerprint`):
/// its modification time and a hash of its first and last bytes. The
/// server continues an unfinished upload only for the same fingerprint, so
/// another file of the same name and size starts over instead of being
/// spliced onto the bytes held of the first. Not a checksum of the whole
/// file, which would read all of it before the first byte is sent; FNV-1a
/// because it only has to tell files apart, not resist forgery.
pub fn file_fingerprint(last_modified_ms: f64, head: &[u8], tail: &[u8]) -> String {
    let hash = head
        .iter()
        .chain(tail)
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{}-{hash:016x}", last_modified_ms.max(0.0) as u64)
}

pub fn download_url(code: &str, version: &str, name: &str) -> String {
    format!("/datasets/{}/{}/download?name={}", encode(code), encode(version), encode(name))
}

pub fn version_url(code: &str, version: &str) -> String {
    format!("/datasets/{}/{}", encode(code), encode(version))
}

/// Percent-encodes a path segment or query value.
pub use gantry_core::url::encode;

/// "3.2 MiB/s · 12 s left" from bytes sent, the total and seconds so far.
pub fn rate_label(sent: f64, total: f64, secs: f64) -> String {
    if secs <= 0.0 || sent <= 0.0 {
        return String::new();
    }
    let rate = sent / secs;
    let left = ((total - sent).max(0.0) / rate).ceil() as u64;
    let left = if left >= 120 { format!("{} min left", left.div_ceil(60)) } else { format!("{left} s left") };
    format!("{}/s · {left}", gantry_core::datasets::format_bytes(rate as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_labels() {
        assert_eq!(
            upload_url("coco", "v1", "a b/c.jpg", true),
            "/datasets/coco/v1/upload?name=a%20b%2Fc.jpg&replace=1"
        );
        assert_eq!(download_url("coco", "v1", "x.bin"), "/datasets/coco/v1/download?name=x.bin");
        assert_eq!(rate_label(2048.0, 4096.0, 2.0), "1.0 KiB/s · 2 s left");
        assert_eq!(rate_label(0.0, 10.0, 1.0), "");
        assert_eq!(rate_label(1024.0, 1024.0 * 1000.0, 1.0), "1.0 KiB/s · 17 min left");
    }

    #[test]
    fn held_labels_say_what_is_known() {
        assert_eq!(held_label(Some(100), Some(600)), "100 B of 600 B");
        assert_eq!(held_label(Some(2048), None), "2.0 KiB (length not declared)");
        assert_eq!(held_label(None, Some(600)), "unknown of 600 B");
        assert_eq!(held_label(None, None), "unknown");
    }

    #[test]
    fn fingerprints_tell_files_of_one_size_apart() {
        let a = file_fingerprint(1_700_000_000_123.0, b"head", b"tail");
        assert_eq!(a, file_fingerprint(1_700_000_000_123.0, b"head", b"tail"), "the same file, the same name");
        assert_ne!(a, file_fingerprint(1_700_000_000_123.0, b"head", b"tall"), "other last bytes");
        assert_ne!(a, file_fingerprint(1_700_000_000_124.0, b"head", b"tail"), "modified since");
        assert!(a.starts_with("1700000000123-") && a.len() == 14 + 16, "{a}");
        assert!(a.bytes().all(|b| b.is_ascii_graphic()), "a header value: {a}");
    }
}
