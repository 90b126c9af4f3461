//! Percent-encoding of URL parts (a query value, a path segment, a file
//! name in `Content-Disposition`), on the `percent-encoding` crate: every
//! byte but RFC 3986's unreserved ones is encoded, so a value can never
//! end its part early or smuggle in another.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but `A–Z a–z 0–9 - _ . ~`.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
/// As [`COMPONENT`], with `/` left readable (a path carried in a query).
const PATH: &AsciiSet = &COMPONENT.remove(b'/');

/// `s` encoded as one query value or path segment.
pub fn encode(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}

/// `s` encoded as a query value that holds a path (`/` kept).
pub fn encode_path(s: &str) -> String {
    utf8_percent_encode(s, PATH).to_string()
}

/// A query key or value as browsers send it: `+` is a space, then
/// percent-decoded; bytes that are not UTF-8 become U+FFFD.
pub fn decode_form(s: &str) -> String {
    percent_decode_str(&s.replace('+', " ")).decode_utf8_lossy().into_owned()
}

/// A path segment percent-decoded, or `None` when it is not UTF-8.
pub fn decode_segment(s: &str) -> Option<String> {
    percent_decode_str(s).decode_utf8().ok().map(|c| c.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unreserved_bytes_stay_as_they_are() {
        assert_eq!(encode("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(encode("a b/c?d&e=f#g%"), "a%20b%2Fc%3Fd%26e%3Df%23g%25");
        assert_eq!(encode("é"), "%C3%A9");
        assert_eq!(encode_path("/machines?x=1"), "/machines%3Fx%3D1");
    }

    #[test]
    fn form_decoding_reads_plus_as_space_and_survives_bad_input() {
        assert_eq!(decode_form("%5F%5Ferr+x"), "__err x");
        assert_eq!(decode_form("%zz%"), "%zz%");
        assert_eq!(decode_form("%FF"), "\u{FFFD}");
        assert_eq!(decode_segment("a%20b"), Some("a b".into()));
        assert_eq!(decode_segment("%FF"), None);
    }
}
