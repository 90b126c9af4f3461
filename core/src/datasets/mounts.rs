//! Sealed dataset versions mounted read-only into dev machines and compute
//! tasks: how a request names them (`code/version`) and where they appear
//! inside the container (`/datasets/{code}/{version}`).

use super::{code, version, DatasetRuleError};

/// Where every mounted version appears inside a container.
pub const MOUNT_ROOT: &str = "/datasets";
/// Most versions one machine mounts (each is one bind mount).
pub const MOUNTS_MAX: usize = 16;

/// One sealed version a request asks for, by the names users see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountRef {
    pub code: String,
    pub version: String,
}

impl MountRef {
    /// The path inside the container: the version's category folders and
    /// files sit below it exactly as in the store.
    pub fn target(&self) -> String {
        format!("{MOUNT_ROOT}/{}/{}", self.code, self.version)
    }
}

impl std::fmt::Display for MountRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.code, self.version)
    }
}

/// Parses `code/version` items separated by commas, spaces or new lines
/// (what a form field or a JSON list joined by commas gives). Repeats
/// collapse into one; order is kept; an empty input is no mounts.
pub fn parse_mounts(input: &str) -> Result<Vec<MountRef>, DatasetRuleError> {
    let mut out: Vec<MountRef> = Vec::new();
    for item in input.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()) {
        let bad = |why: String| DatasetRuleError::BadMount { item: item.chars().take(80).collect(), why };
        let (c, v) =
            item.split_once('/').ok_or_else(|| bad("write it as dataset-code/version, e.g. imagenet/v1".into()))?;
        code(c).map_err(|e| bad(e.to_string()))?;
        version(v).map_err(|e| bad(e.to_string()))?;
        let parsed = MountRef { code: c.to_string(), version: v.to_string() };
        if !out.contains(&parsed) {
            out.push(parsed);
        }
        if out.len() > MOUNTS_MAX {
            return Err(DatasetRuleError::TooManyMounts { max: MOUNTS_MAX });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_in_any_separator_parse_in_order_without_repeats() {
        let got = parse_mounts(" imagenet/v1, text-8/2024-06\ncoco/v2 imagenet/v1 ").unwrap();
        let names: Vec<String> = got.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["imagenet/v1", "text-8/2024-06", "coco/v2"]);
        assert_eq!(got[1].target(), "/datasets/text-8/2024-06");
        assert!(parse_mounts("").unwrap().is_empty());
        assert!(parse_mounts(" , \n").unwrap().is_empty());
    }

    #[test]
    fn anything_that_could_leave_the_mount_root_is_refused() {
        for bad in [
            "imagenet",
            "imagenet/",
            "/v1",
            "../etc/v1",
            "imagenet/..",
            "imagenet/.hidden",
            "Imagenet/v1",
            "a/b/c",
            "a/v1\0",
        ] {
            let err = parse_mounts(bad).unwrap_err();
            assert!(matches!(err, DatasetRuleError::BadMount { .. }), "{bad:?} gave {err:?}");
        }
    }

    #[test]
    fn more_than_the_limit_is_refused_with_the_limit() {
        let many: Vec<String> = (0..=MOUNTS_MAX).map(|i| format!("d{i}/v1")).collect();
        assert_eq!(parse_mounts(&many.join(",")).unwrap_err(), DatasetRuleError::TooManyMounts { max: MOUNTS_MAX });
        assert_eq!(parse_mounts(&many[..MOUNTS_MAX].join(",")).unwrap().len(), MOUNTS_MAX);
    }
}
