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
/// One path segment of a file name (most file systems stop at 255 bytes).
pub const SEGMENT_MAX: usize = 255;
/// A whole file name, sub-folders included.
pub const FILE_NAME_MAX: usize = 1024;

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
    let ok = !value.starts_with('.') && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
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

/// Who may see a dataset: its owning group only, or every group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    Group,
    Public,
}

impl Visibility {
    pub fn parse(value: &str) -> Result<Self, DatasetRuleError> {
        match value {
            "group" => Ok(Visibility::Group),
            "public" => Ok(Visibility::Public),
            other => Err(DatasetRuleError::UnknownVisibility(other.to_string())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Group => "group",
            Visibility::Public => "public",
        }
    }
}

/// Characters that show nothing, or reorder what is shown around them
/// (Unicode format characters): in a name they make one file look like
/// another — `report\u{202E}fdp.exe` is displayed `reportexe.pdf`.
fn invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// A file name inside a version: relative, `/`-separated sub-folders
/// allowed, no `.`/`..` or empty segments, no control characters or
/// backslashes (a Windows separator would be a second way to climb out).
pub fn file_name(value: &str) -> Result<(), DatasetRuleError> {
    let bad = |why| Err(DatasetRuleError::BadFileName { name: value.chars().take(80).collect(), why });
    if value.is_empty() {
        return Err(DatasetRuleError::Required("file name"));
    }
    if value.len() > FILE_NAME_MAX {
        return bad("longer than 1024 bytes");
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
            s if s.len() > SEGMENT_MAX => return bad("a path segment is longer than 255 bytes"),
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
mod range;
pub use mounts::{parse_mounts, MountRef, MOUNTS_MAX, MOUNT_ROOT};
pub use quota::{check_quota, format_bytes, QuotaRefusal};
pub use range::{byte_range, ByteRange};

#[cfg(test)]
mod tests;
