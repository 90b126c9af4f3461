//! What a test finds on disk.

use std::path::Path;

/// Every file under `root`, relative to it, sorted (what a store or an
/// upload left behind).
pub fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(relative) = path.strip_prefix(root) {
                out.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_files_are_listed_relative_and_sorted() {
        let dir = std::env::temp_dir().join(format!("gantry-testkit-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("b/c")).unwrap();
        std::fs::write(dir.join("b/c/z"), b"").unwrap();
        std::fs::write(dir.join("a"), b"").unwrap();
        let listed = files_under(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(listed, ["a", "b/c/z"]);
    }
}
