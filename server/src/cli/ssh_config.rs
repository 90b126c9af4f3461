//! `gantry machines ssh NAME` writes `Host gantry-NAME` into
//! `~/.ssh/gantry/config`, a file of Gantry's own that `~/.ssh/config`
//! includes (one `Include` line put at its top, where ssh reads it for
//! every host), so the user's own file is touched once and every later
//! write changes only Gantry's. Writing is idempotent: a host's block is
//! replaced where it stands, other hosts are kept as they were.

use super::CliError;
use std::{
    fs,
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

/// The line `~/.ssh/config` needs (relative paths are read from `~/.ssh`).
pub const INCLUDE: &str = "Include gantry/config";

/// One machine's entry: `ssh gantry-NAME` is `ssh -p PORT NAME@HOST`.
pub struct HostEntry<'a> {
    pub machine: &'a str,
    pub host: &'a str,
    pub port: u16,
}

impl HostEntry<'_> {
    pub fn alias(&self) -> String {
        format!("gantry-{}", self.machine)
    }

    fn block(&self) -> String {
        format!(
            "Host {}\n    HostName {}\n    Port {}\n    User {}\n",
            self.alias(),
            self.host,
            self.port,
            self.machine
        )
    }
}

/// `config` (Gantry's file) with `entry`'s block in place of any earlier
/// one for the same alias, or added at the end.
pub fn upsert(config: &str, entry: &HostEntry) -> String {
    let alias = entry.alias();
    let mut out = String::new();
    let mut replaced = false;
    let mut skipping = false;
    for line in config.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first().is_some_and(|w| w.eq_ignore_ascii_case("host")) {
            skipping = words.len() == 2 && words[1] == alias;
            if skipping && !replaced {
                out.push_str(&entry.block());
                replaced = true;
            }
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !replaced {
        if !out.is_empty() && !out.ends_with("\n\n") {
            out.push('\n');
        }
        out.push_str(&entry.block());
    }
    out
}

/// The user's `~/.ssh/config` with the `Include` at its top, or `None`
/// when it is already there.
pub fn with_include(user_config: &str) -> Option<String> {
    let has = user_config.lines().any(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words.len() == 2 && words[0].eq_ignore_ascii_case("include") && words[1].ends_with("gantry/config")
    });
    (!has).then(|| format!("# Gantry's machines (gantry machines ssh)\n{INCLUDE}\n\n{user_config}"))
}

fn ssh_dir() -> Result<PathBuf, CliError> {
    dirs::home_dir().map(|h| h.join(".ssh")).ok_or_else(|| CliError::usage("cannot tell your home directory"))
}

/// Writes the entry; the alias to run `ssh` with.
pub fn write(entry: &HostEntry) -> Result<(String, PathBuf), CliError> {
    let ssh = ssh_dir()?;
    let ours = ssh.join("gantry");
    let failed = |what: &Path, e: std::io::Error| CliError(format!("cannot write {}: {e}", what.display()));
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&ours).map_err(|e| failed(&ours, e))?;
    let file = ours.join("config");
    let current = read(&file)?;
    let updated = upsert(&current, entry);
    if updated != current {
        replace(&file, &updated).map_err(|e| failed(&file, e))?;
    }
    let user_file = ssh.join("config");
    if let Some(updated) = with_include(&read(&user_file)?) {
        replace(&user_file, &updated).map_err(|e| failed(&user_file, e))?;
    }
    Ok((entry.alias(), file))
}

fn read(path: &Path) -> Result<String, CliError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(CliError(format!("cannot read {}: {e}", path.display()))),
    }
}

/// A new file (0600: ssh refuses a config others may write) renamed over
/// the old one, so a reader never sees half of it.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("gantry-tmp-{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::{upsert, with_include, HostEntry};

    #[test]
    fn writing_a_host_twice_changes_nothing_and_keeps_the_others() {
        let a = HostEntry { machine: "train", host: "gantry.example.org", port: 2222 };
        let once = upsert("Host other\n    HostName 10.0.0.1\n", &a);
        assert_eq!(
            once,
            "Host other\n    HostName 10.0.0.1\n\nHost gantry-train\n    HostName gantry.example.org\n    Port 2222\n    User train\n"
        );
        assert_eq!(upsert(&once, &a), once, "idempotent");
        // A changed port replaces the block in place; the others stay.
        let moved = upsert(&once, &HostEntry { port: 2200, ..a });
        assert!(moved.contains("Port 2200") && !moved.contains("Port 2222"), "{moved}");
        assert!(moved.starts_with("Host other\n    HostName 10.0.0.1\n"), "{moved}");
        let b = HostEntry { machine: "eval", host: "gantry.example.org", port: 2222 };
        let both = upsert(&moved, &b);
        assert!(both.contains("Host gantry-train") && both.contains("Host gantry-eval") && both.contains("Host other"));
        // A host whose name merely starts like ours is another host.
        let prefix = HostEntry { machine: "train2", host: "h", port: 1 };
        assert!(upsert(&both, &prefix).contains("User train\n"), "gantry-train kept");
    }

    #[test]
    fn the_include_goes_at_the_top_once() {
        let user = "Host work\n    User me\n";
        let with = with_include(user).unwrap();
        assert!(with.contains("Include gantry/config\n") && with.ends_with(user), "{with}");
        assert!(with.find("Include") < with.find("Host work"));
        assert_eq!(with_include(&with), None, "already there");
        assert!(with_include("").is_some());
    }
}
