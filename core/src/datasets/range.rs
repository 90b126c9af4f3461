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
