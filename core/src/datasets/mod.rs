//! Dataset rules: what a dataset code, a version name and a file name may
//! be, where a file lives in a store, the byte quota of a group, and the
//! `Range` header of a download. Pure, so the browser checks names with the
//! server's rules.

use thiserror::Error;

/// Categories a dataset can be filed under; the category is part of every
/// stored path, so the set is closed.
pub const CATEGORIES: [&str; 6] = ["images", "text", "audio", "video", "tabular", "other"];

pub const CODE_MAX: usize = 64;
pub const VERSION_MAX: usize = 64;
/// One path segment of a file name as stored ([`stored_len`]): most file
/// systems stop at 255 bytes, and the JuiceFS gateway keeps each segment of
/// an S3 key as a file name.
pub const SEGMENT_MAX: usize = 255;
/// A whole file name as stored, sub-folders included: behind the longest
/// `{code}/{version}/{category}/` the key still fits the 1024 bytes that
/// S3 and MinIO allow.
pub const FILE_NAME_MAX: usize = KEY_MAX - KEY_PREFIX_MAX;
const KEY_MAX: usize = 1024;
const KEY_PREFIX_MAX: usize = CODE_MAX + VERSION_MAX + longest(&CATEGORIES) + "///".len();

const fn longest(words: &[&str]) -> usize {
    let (mut i, mut most) = (0, 0);
    while i < words.len() {
        if words[i].len() > most {
            most = words[i].len();
        }
        i += 1;
    }
    most
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DatasetRuleError {
    #[error("{0} is required")]
    Required(&'static str),
    #[error("{field} must be at most {max} characters")]
    TooLong { field: &'static str, max: usize },
    #[error("the dataset code may contain only lowercase letters, digits, '-' and '_', and must start with a letter or digit")]
    BadCode,
    #[error("the version name may contain only letters, digits, '.', '-' and '_', and must not start with '.'")]
    BadVersion,
    #[error("unknown category \"{0}\" (expected one of images, text, audio, video, tabular, other)")]
    UnknownCategory(String),
    #[error("unknown visibility \"{0}\" (expected group or public)")]
    UnknownVisibility(String),
    #[error("file name \"{name}\" refused: {why}")]
    BadFileName { name: String, why: &'static str },
    #[error("dataset mount \"{item}\" refused: {why}")]
    BadMount { item: String, why: String },
    #[error("at most {max} dataset versions can be mounted into one machine")]
    TooManyMounts { max: usize },
}

pub fn code(value: &str) -> Result<(), DatasetRuleError> {
    if value.is_empty() {
        return Err(DatasetRuleError::Required("dataset code"));
    }
    if value.len() > CODE_MAX {
        return Err(DatasetRuleError::TooLong { field: "dataset code", max: CODE_MAX });
    }
    let first_ok = value.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let all_ok = value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if first_ok && all_ok {
        Ok(())
    } else {
        Err(DatasetRuleError::BadCode)
    }
}

/// `v1`, `v2`, `2024-06`, `baseline.1`: one path segment, never hidden.
pub fn version(value: &str) -> Result<(), DatasetRuleError> {
    if value.is_empty() {
        return Err(DatasetRuleError::Required("version name"));
    }
    if value.len() > VERSION_MAX {
        return Err(DatasetRuleError::TooLong { field: "version name", max: VERSION_MAX });
    }
    let ok =
        !value.starts_with('.') && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(DatasetRuleError::BadVersion)
    }
}

pub fn category(value: &str) -> Result<(), DatasetRuleError> {
    if CATEGORIES.contains(&value) {
        Ok(())
    } else {
        Err(DatasetRuleError::UnknownCategory(value.to_string()))
    }
}

crate::task::string_enum! {
    /// Who may see a dataset: its owning group only, or every group.
    Visibility, "dataset visibility" {
        Group => "group",
        Public => "public",
    }
}

impl Visibility {
    /// A form's or request's visibility, refused in the dataset rules' words.
    pub fn parse(value: &str) -> Result<Self, DatasetRuleError> {
        value.parse().map_err(|_| DatasetRuleError::UnknownVisibility(value.to_string()))
    }
}

/// Characters that show nothing, or reorder or break what is shown around
/// them: in a name they make one file look like another —
/// `report\u{202E}fdp.exe` is displayed `reportexe.pdf`, and
/// `report\u{E0041}.pdf` (a tag) just like `report.pdf`. Every Unicode
/// format character, the line and paragraph separators, and the
/// characters that display as blanks or nothing (the Hangul fillers, the
/// combining grapheme joiner, the Khmer inherent vowels).
fn invisible(c: char) -> bool {
    format_character(c)
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{034F}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{3164}'
                | '\u{FFA0}'
        )
}

/// General category Cf (std has no table of it), with the unassigned code
/// points among them that Unicode keeps for more of the same (U+2065,
/// U+FFF0–FFF8, the rest of the tag block).
fn format_character(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}' | '\u{0890}'..='\u{0891}' | '\u{08E2}' | '\u{180E}'
        | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF0}'..='\u{FFFB}'
        | '\u{110BD}' | '\u{110CD}' | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E007F}')
}

/// Bytes a path segment takes in a key as the S3 store writes it:
/// `object_store` percent-encodes every byte of a non-ASCII character, the
/// controls and the signs S3 and Google advise against, so `数` takes 9
/// bytes and `#` 3. The limits hold for every store: a name that fits one
/// fits all.
pub fn stored_len(segment: &str) -> usize {
    segment
        .bytes()
        .map(|b| if b >= 0x80 || b.is_ascii_control() || b"\"#%*<>?[\\]^`{|}~".contains(&b) { 3 } else { 1 })
        .sum()
}

/// How a name's length is counted, for its refusal.
macro_rules! as_stored {
    () => {
        " (each byte of a non-ASCII character, and each of \" # % * < > ? [ ] ^ ` { | } ~, counts 3)"
    };
}

/// A file name inside a version: relative, `/`-separated sub-folders
/// allowed, no `.`/`..` or empty segments, no control characters or
/// backslashes (a Windows separator would be a second way to climb out).
pub fn file_name(value: &str) -> Result<(), DatasetRuleError> {
    let bad = |why| Err(DatasetRuleError::BadFileName { name: value.chars().take(80).collect(), why });
    if value.is_empty() {
        return Err(DatasetRuleError::Required("file name"));
    }
    if value.split('/').map(stored_len).sum::<usize>() + value.matches('/').count() > FILE_NAME_MAX {
        return bad(concat!("longer than 886 bytes as stored", as_stored!()));
    }
    if value.starts_with('/') {
        return bad("absolute paths are not allowed");
    }
    if value.chars().any(|c| c.is_control()) {
        return bad("control characters are not allowed");
    }
    if value.chars().any(invisible) {
        return bad("invisible and text-direction characters are not allowed");
    }
    if value.contains('\\') {
        return bad("backslashes are not allowed");
    }
    for segment in value.split('/') {
        match segment {
            "" => return bad("empty path segments are not allowed"),
            "." | ".." => return bad("'.' and '..' are not allowed"),
            s if stored_len(s) > SEGMENT_MAX => {
                return bad(concat!("a path segment is longer than 255 bytes as stored", as_stored!()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Where a file lives in every store: `{code}/{version}/{category}/{file}`.
/// Callers pass validated parts, so the key never leaves its prefix.
pub fn storage_key(code: &str, version: &str, category: &str, file: &str) -> String {
    format!("{code}/{version}/{category}/{file}")
}

/// The prefix holding a whole version in every store.
pub fn version_prefix(code: &str, version: &str) -> String {
    format!("{code}/{version}/")
}

mod mounts;
mod quota;
pub use mounts::{parse_mounts, MountRef, MOUNTS_MAX, MOUNT_ROOT};
pub use quota::{check_quota, format_bytes, QuotaRefusal};

#[cfg(test)]
mod tests;
