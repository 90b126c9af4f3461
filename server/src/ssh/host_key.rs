//! The gateway's host key: an ed25519 key made once and kept in the data
//! directory (`ssh_host_ed25519_key`, mode 0600), so clients that trusted
//! it on their first connect keep trusting this server across restarts.

use gantry_platform::PlatformError;
use russh::keys::{
    ssh_key::{private::Ed25519Keypair, LineEnding},
    PrivateKey,
};
use std::{io::Write, os::unix::fs::OpenOptionsExt, path::Path};

const FILE: &str = "ssh_host_ed25519_key";

pub fn load_or_make(data_dir: &Path) -> Result<PrivateKey, PlatformError> {
    let path = data_dir.join(FILE);
    let failed = |what: &str, e: &dyn std::fmt::Display| {
        PlatformError::Internal(format!("SSH host key {}: {what}: {e}", path.display()))
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => return PrivateKey::from_openssh(text.as_bytes()).map_err(|e| failed("cannot be read", &e)),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed("cannot be opened", &e)),
        Err(_) => {}
    }
    let seed: [u8; 32] = rand::random();
    let key = PrivateKey::from(Ed25519Keypair::from_seed(&seed));
    let text = key.to_openssh(LineEnding::LF).map_err(|e| failed("cannot be encoded", &e))?;
    std::fs::create_dir_all(data_dir).map_err(|e| failed("its directory cannot be made", &e))?;
    // Written under a temporary name and renamed: a crash never leaves a
    // half key that the next start would refuse to read.
    let tmp = data_dir.join(format!("{FILE}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| failed("cannot be written", &e))?;
    file.write_all(text.as_bytes()).and_then(|_| file.sync_all()).map_err(|e| failed("cannot be written", &e))?;
    std::fs::rename(&tmp, &path).map_err(|e| failed("cannot be put in place", &e))?;
    tracing::info!(path = %path.display(), "made the SSH gateway's host key");
    Ok(key)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_is_made_once_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let a = super::load_or_make(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(super::FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = super::load_or_make(dir.path()).unwrap();
        assert_eq!(a.public_key(), b.public_key(), "the same key on the next start");
    }
}
