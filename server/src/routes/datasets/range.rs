//! The `Range` header of a download: one `bytes=` range, as browsers and
//! download tools send when resuming. The syntax is `http-range-header`'s;
//! what a range means for a file of a given size is decided here. Several
//! ranges, or a header that does not parse, get the whole file (RFC 9110
//! lets a server ignore Range).

use http_range_header::{parse_range_header, EndPosition, RangeUnsatisfiableError, StartPosition};

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
    let Some(header) = header else { return ByteRange::Whole };
    let ranges = match parse_range_header(header.trim()) {
        Ok(parsed) => parsed.ranges,
        // `bytes=-0`: the last zero bytes, which no file has.
        Err(RangeUnsatisfiableError::ZeroSuffix) => return ByteRange::Unsatisfiable,
        Err(_) => return ByteRange::Whole,
    };
    let [range] = ranges.as_slice() else { return ByteRange::Whole };
    let (start, end) = match (range.start, range.end) {
        // A suffix: the last N bytes (all of them when N is larger).
        (StartPosition::FromLast(_), _) if size == 0 => return ByteRange::Unsatisfiable,
        (StartPosition::FromLast(n), _) => (size.saturating_sub(n), size - 1),
        (StartPosition::Index(start), _) if start >= size => return ByteRange::Unsatisfiable,
        (StartPosition::Index(start), EndPosition::LastByte) => (start, size - 1),
        (StartPosition::Index(start), EndPosition::Index(end)) if end >= start => (start, end.min(size - 1)),
        (StartPosition::Index(_), EndPosition::Index(_)) => return ByteRange::Whole,
    };
    ByteRange::Part { start, end }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_range_is_served_and_anything_else_gets_the_whole_file() {
        assert_eq!(byte_range(None, 10), ByteRange::Whole);
        assert_eq!(byte_range(Some("bytes=2-5"), 10), ByteRange::Part { start: 2, end: 5 });
        assert_eq!(byte_range(Some("bytes=2-"), 10), ByteRange::Part { start: 2, end: 9 });
        assert_eq!(byte_range(Some("bytes=-3"), 10), ByteRange::Part { start: 7, end: 9 });
        assert_eq!(byte_range(Some("bytes=-30"), 10), ByteRange::Part { start: 0, end: 9 });
        assert_eq!(byte_range(Some("bytes=5-100"), 10), ByteRange::Part { start: 5, end: 9 });
        assert_eq!(byte_range(Some("bytes=10-"), 10), ByteRange::Unsatisfiable);
        assert_eq!(byte_range(Some("bytes=-3"), 0), ByteRange::Unsatisfiable);
        assert_eq!(byte_range(Some("bytes=0-1,4-5"), 10), ByteRange::Whole);
        assert_eq!(byte_range(Some("bytes=5-2"), 10), ByteRange::Whole);
        assert_eq!(byte_range(Some("items=1-2"), 10), ByteRange::Whole);
        assert_eq!(byte_range(Some("bytes=x-2"), 10), ByteRange::Whole);
        assert_eq!(byte_range(Some("bytes=-0"), 10), ByteRange::Unsatisfiable);
    }

    #[test]
    fn if_range_lets_a_range_through_only_for_the_current_strong_tag() {
        let etag = "\"abc\"";
        assert!(range_applies(None, etag));
        assert!(range_applies(Some("\"abc\""), etag));
        assert!(range_applies(Some(" \"abc\" "), etag));
        for stale in ["\"old\"", "W/\"abc\"", "Wed, 21 Oct 2015 07:28:00 GMT", "", "abc"] {
            assert!(!range_applies(Some(stale), etag), "{stale}");
        }
    }
}
