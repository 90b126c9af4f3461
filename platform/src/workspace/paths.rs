//! Paths inside a machine's volume. A path given by a user is taken
//! relative to the volume (`/data`); `/data/...` is accepted too. Nothing
//! that could leave the volume is accepted: no `..`, no other absolute
//! path; nor control characters (NUL, newlines, escapes), which would cut
//! the path short or reach log lines as is. Symbolic links inside the
//! volume are checked against the engine separately (see the Docker
//! executor's archive code).

use crate::executor::DATA_MOUNT;

/// Longest path accepted (Linux's PATH_MAX) and longest name (NAME_MAX).
const PATH_MAX: usize = 4096;
const NAME_MAX: usize = 255;
/// Most folders deep: the files routes ask the engine about every prefix
/// of a path (one archive call each, which on a stopped machine mounts its
/// volume), so `a/a/…` to PATH_MAX made one request cost ~2,000 calls.
pub const MAX_DEPTH: usize = 64;

/// A checked path inside the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumePath {
    /// Components below the volume root, each non-empty, not `.` or `..`.
    parts: Vec<String>,
}

impl VolumePath {
    /// Parses a user's path. `""`, `"."`, `"/data"` mean the volume root.
    pub fn parse(input: &str) -> Result<VolumePath, String> {
        if input.len() > PATH_MAX {
            return Err(format!("the path is longer than {PATH_MAX} bytes"));
        }
        // NUL cuts a path short in the engine; a newline or an escape
        // sequence would forge or garble log lines that quote the path. (A
        // tab does neither, and files with one in their name exist.)
        if let Some(c) = input.chars().find(|c| c.is_control() && *c != '\t') {
            return Err(format!(
                "the path contains a control character ({:?}); only printable characters are allowed",
                c
            ));
        }
        let trimmed = input.trim();
        let rest = if trimmed == DATA_MOUNT {
            ""
        } else if let Some(rest) = trimmed.strip_prefix(concat_data_slash().as_str()) {
            rest
        } else if trimmed.starts_with('/') {
            return Err(format!("paths must stay inside the volume {DATA_MOUNT}: {trimmed:?} is outside it"));
        } else {
            trimmed
        };
        let mut parts = Vec::new();
        for part in rest.split('/') {
            match part {
                "" | "." => continue,
                ".." => return Err(format!("paths must stay inside the volume {DATA_MOUNT}: '..' is not allowed")),
                p if p.len() > NAME_MAX => return Err(format!("a path component is longer than {NAME_MAX} bytes")),
                p => parts.push(p.to_string()),
            }
            if parts.len() > MAX_DEPTH {
                return Err(format!("the path is more than {MAX_DEPTH} folders deep"));
            }
        }
        Ok(VolumePath { parts })
    }

    pub fn is_root(&self) -> bool {
        self.parts.is_empty()
    }

    /// The absolute path in the container, e.g. `/data/results/a.txt`.
    pub fn absolute(&self) -> String {
        if self.parts.is_empty() {
            DATA_MOUNT.to_string()
        } else {
            format!("{DATA_MOUNT}/{}", self.parts.join("/"))
        }
    }

    /// The path relative to the volume root, e.g. `results/a.txt`.
    pub fn relative(&self) -> String {
        self.parts.join("/")
    }

    /// The last component (the file's name); `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        self.parts.last().map(String::as_str)
    }

    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// Every ancestor below the root and the path itself, shortest first:
    /// `a/b/c` gives `/data/a`, `/data/a/b`, `/data/a/b/c`.
    pub fn prefixes(&self) -> Vec<String> {
        (1..=self.parts.len()).map(|n| format!("{DATA_MOUNT}/{}", self.parts[..n].join("/"))).collect()
    }

    /// `dir` joined with a file name (which must be one component).
    pub fn join_name(&self, name: &str) -> Result<VolumePath, String> {
        let name = name.rsplit(['/', '\\']).next().unwrap_or("").trim();
        if name.is_empty() || name == "." || name == ".." {
            return Err("the file needs a name".into());
        }
        let mut parts = self.parts.clone();
        parts.push(name.to_string());
        VolumePath::parse(&parts.join("/"))
    }
}

fn concat_data_slash() -> String {
    format!("{DATA_MOUNT}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_more_than_64_folders_deep_is_refused() {
        let deep = |n: usize| vec!["a"; n].join("/");
        assert_eq!(VolumePath::parse(&deep(MAX_DEPTH)).unwrap().parts().len(), MAX_DEPTH);
        assert_eq!(VolumePath::parse(&deep(MAX_DEPTH + 1)).unwrap_err(), "the path is more than 64 folders deep");
        // Empty and "." parts do not count.
        assert!(VolumePath::parse(&format!("{}/./", deep(MAX_DEPTH))).is_ok());
        assert!(VolumePath::parse(&deep(MAX_DEPTH)).unwrap().join_name("one-more").is_err());
    }

    #[test]
    fn relative_and_data_paths_are_accepted() {
        assert_eq!(VolumePath::parse("results/a.txt").unwrap().absolute(), "/data/results/a.txt");
        assert_eq!(VolumePath::parse("/data/results/a.txt").unwrap().relative(), "results/a.txt");
        assert_eq!(VolumePath::parse("./x//y/").unwrap().absolute(), "/data/x/y");
        assert!(VolumePath::parse("").unwrap().is_root());
        assert!(VolumePath::parse("/data").unwrap().is_root());
        assert_eq!(VolumePath::parse("/data").unwrap().absolute(), "/data");
        assert_eq!(VolumePath::parse("a/b/c").unwrap().prefixes(), vec!["/data/a", "/data/a/b", "/data/a/b/c"]);
    }

    #[test]
    fn traversal_and_outside_paths_are_refused() {
        for bad in ["../../etc/passwd", "a/../../etc", "/etc/passwd", "/data/../etc/passwd", "/datax/y", "a/\0b", ".."]
        {
            assert!(VolumePath::parse(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(VolumePath::parse(&"a/".repeat(3000)).is_err(), "too long");
        assert!(VolumePath::parse(&"n".repeat(256)).is_err(), "name too long");
    }

    #[test]
    fn control_characters_are_refused() {
        // A newline (or any control character) would reach log lines as is.
        for bad in ["a\nb", "a/b\r", "x\u{1b}[31m", "del\u{7f}", "a\u{85}b", "/data/a\n"] {
            let e = VolumePath::parse(bad).expect_err(bad);
            assert!(e.contains("control character"), "{bad:?}: {e}");
        }
        let e = VolumePath::parse("a/\0b").unwrap_err();
        assert!(e.contains("control character"), "{e}");
        let dir = VolumePath::parse("up").unwrap();
        assert!(dir.join_name("evil\n.txt").is_err());
        // Spaces, tabs and non-ASCII names are fine.
        assert_eq!(VolumePath::parse("tab\there").unwrap().absolute(), "/data/tab\there");
        assert_eq!(VolumePath::parse("my files/résumé.txt").unwrap().absolute(), "/data/my files/résumé.txt");
    }

    #[test]
    fn names_are_single_components() {
        let dir = VolumePath::parse("up").unwrap();
        assert_eq!(dir.join_name("C:\\Users\\me\\file.bin").unwrap().absolute(), "/data/up/file.bin");
        assert_eq!(dir.join_name("../../x").unwrap().absolute(), "/data/up/x");
        assert!(dir.join_name("..").is_err());
        assert!(dir.join_name("").is_err());
    }
}
