//! The `Range` header of a download: one `bytes=` range, as browsers and
//! download tools send when resuming. Several ranges get the whole file
//! (allowed by RFC 9110: a server may ignore Range).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// No (usable) Range header: 200 with everything.
    Whole,
    /// 206: bytes `start..=end`.
    Part { start: u64, end: u64 },
    /// 416: the range starts beyond the end.
    Unsatisfiable,
}

/// Whether a `Range` may be answered with part of the file (RFC 9110
/// §13.1.5): always without `If-Range`; with it, only when it is `etag`,
/// the file's current strong entity tag. Another or a weak tag, or a date
/// (no `Last-Modified` is sent, so none can match) gets the whole file: a
/// download resumed after the file was replaced starts over rather than
/// splicing the new file's bytes onto the old one's.
pub fn range_applies(if_range: Option<&str>, etag: &str) -> bool {
    if_range.is_none_or(|v| v.trim() == etag)
}

pub fn byte_range(header: Option<&str>, size: u64) -> ByteRange {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return ByteRange::Whole;
    };
    if spec.contains(',') {
        return ByteRange::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return ByteRange::Whole;
    };
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        // A suffix: the last N bytes.
        return match last.parse::<u64>() {
            Ok(0) => ByteRange::Unsatisfiable,
            Ok(_) if size == 0 => ByteRange::Unsatisfiable,
            Ok(n) => ByteRange::Part { start: size.saturating_sub(n), end: size - 1 },
            Err(_) => ByteRange::Whole,
        };
    }
    let Ok(start) = first.parse::<u64>() else {
        return ByteRange::Whole;
    };
    if start >= size {
        return ByteRange::Unsatisfiable;
    }
    let end = if last.is_empty() {
        size - 1
    } else {
        match last.parse::<u64>() {
            Ok(e) if e >= start => e.min(size - 1),
            _ => return ByteRange::Whole,
        }
    };
    ByteRange::Part { start, end }
}
