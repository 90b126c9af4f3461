//! Where `gantry login` keeps the server's URL and the API token:
//! `credentials.json` in `$GANTRY_CONFIG_DIR`, or else the user's config
//! directory (`~/.config/gantry` on Linux). The token acts as its owner,
//! so the file is created readable by its owner alone (0600, in a 0700
//! directory) — never written first and narrowed after, which would leave
//! a moment when another local user could open it.

use super::CliError;
use serde::{Deserialize, Serialize};
use std::{
    fs,
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::PathBuf,
};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Credentials {
    pub url: String,
    pub token: String,
}

pub fn dir() -> Result<PathBuf, CliError> {
    if let Some(dir) = std::env::var_os("GANTRY_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    dirs::config_dir()
        .map(|d| d.join("gantry"))
        .ok_or_else(|| CliError::usage("cannot tell your config directory; set GANTRY_CONFIG_DIR"))
}

pub fn path() -> Result<PathBuf, CliError> {
    Ok(dir()?.join("credentials.json"))
}

/// What `login` stored, if anything.
pub fn load() -> Result<Option<Credentials>, CliError> {
    let path = path()?;
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            CliError::usage(format!("{} is not what gantry login writes ({e}); run gantry login again", path.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::usage(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Writes the file whole: a new file made 0600 beside it, then renamed
/// over it, so a reader never sees half of one and a crash leaves the old.
pub fn save(creds: &Credentials) -> Result<PathBuf, CliError> {
    let dir = dir()?;
    let failed = |what: &str, e: std::io::Error| CliError::usage(format!("cannot {what} in {}: {e}", dir.display()));
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|e| failed("create the directory", e))?;
    let path = dir.join("credentials.json");
    let tmp = dir.join(format!(".credentials.json.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| failed("write the credentials", e))?;
    // The umask may only narrow 0600; a file made by another tool under
    // this name is not reused (create_new), so the mode is ours.
    let body = serde_json::to_vec_pretty(creds).map_err(|e| CliError::usage(e.to_string()))?;
    file.write_all(&body).and_then(|()| file.sync_all()).map_err(|e| failed("write the credentials", e))?;
    fs::rename(&tmp, &path).map_err(|e| failed("place the credentials", e))?;
    Ok(path)
}

/// Removes the stored credentials; whether there were any.
pub fn remove() -> Result<bool, CliError> {
    let path = path()?;
    match fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(CliError::usage(format!("cannot remove {}: {e}", path.display()))),
    }
}

/// The file's permission bits (tests and `login`'s own check).
pub fn mode(path: &std::path::Path) -> std::io::Result<u32> {
    Ok(fs::metadata(path)?.permissions().mode() & 0o777)
}
