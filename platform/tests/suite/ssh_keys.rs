//! SSH public keys on an account (issue #34): real keys made by OpenSSH's
//! own `ssh-keygen`, added, listed, removed; every refusal (bad text, a
//! key too short or too big, a duplicate, a key already on another
//! account) says why and leaves the account's keys as they were; each
//! change is in the audit log.

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser, User},
    db::Pool,
    ssh_keys, PlatformError,
};
use gantry_testkit::install::Install;
use std::path::Path;

/// A fresh key pair in `dir`; returns the public key's line and the
/// fingerprint `ssh-keygen -l` prints for it.
pub fn keygen(dir: &Path, name: &str, kind: &str, bits: Option<u32>) -> (String, String) {
    let file = dir.join(name);
    let mut cmd = std::process::Command::new("ssh-keygen");
    cmd.args(["-q", "-t", kind, "-N", "", "-C", &format!("{name}@test"), "-f"]).arg(&file);
    if let Some(b) = bits {
        cmd.args(["-b", &b.to_string()]);
    }
    assert!(cmd.status().expect("ssh-keygen (openssh-client) is installed").success());
    let public = std::fs::read_to_string(file.with_extension("pub")).unwrap();
    let listed = std::process::Command::new("ssh-keygen").arg("-lf").arg(file.with_extension("pub")).output().unwrap();
    let fingerprint = String::from_utf8_lossy(&listed.stdout).split_whitespace().nth(1).unwrap().to_string();
    (public, fingerprint)
}

async fn user(pool: &Pool, name: &str) -> User {
    accounts::create_user(
        pool,
        None,
        NewUser { username: name, password: "password-123", role: Role::User, group: None },
    )
    .await
    .unwrap()
}

async fn audit_count(pool: &Pool, action: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM audit_log WHERE action = ?").bind(action).fetch_one(pool).await.unwrap()
}

gantry_testkit::timed_test! {
    async fn keys_are_added_listed_and_removed_with_their_fingerprints() {
        let Install { dir: _dir, pool } = Install::new().await;
        let keys = tempfile::tempdir().unwrap();
        let alice = user(&pool, "alice").await;
        let (ed, ed_fp) = keygen(keys.path(), "ed", "ed25519", None);
        let (ec, ec_fp) = keygen(keys.path(), "ec", "ecdsa", Some(384));
        let (rsa, rsa_fp) = keygen(keys.path(), "rsa", "rsa", Some(3072));
        let a = ssh_keys::add(&pool, &alice, "", &ed).await.unwrap();
        assert_eq!((a.name.as_str(), a.algorithm.as_str(), a.fingerprint.as_str()), ("ed@test", "ssh-ed25519", ed_fp.as_str()));
        let b = ssh_keys::add(&pool, &alice, "laptop", &ec).await.unwrap();
        assert_eq!((b.name.as_str(), b.bits, b.fingerprint.as_str()), ("laptop", 384, ec_fp.as_str()));
        let c = ssh_keys::add(&pool, &alice, "old box", &rsa).await.unwrap();
        assert_eq!((c.bits, c.fingerprint.as_str()), (3072, rsa_fp.as_str()));
        let listed = ssh_keys::list(&pool, &alice).await.unwrap();
        assert_eq!(listed, vec![a.clone(), b.clone(), c.clone()]);
        // The gateway finds the account by fingerprint.
        let (key_id, who) = ssh_keys::holder(&pool, &ed_fp).await.unwrap().unwrap();
        assert_eq!((key_id, who.id), (a.id, alice.id));
        ssh_keys::remove(&pool, &alice, b.id).await.unwrap();
        assert_eq!(ssh_keys::list(&pool, &alice).await.unwrap(), vec![a, c]);
        assert!(ssh_keys::holder(&pool, &ec_fp).await.unwrap().is_none(), "a removed key lets nobody in");
        assert_eq!(audit_count(&pool, "ssh_key.add").await, 3);
        assert_eq!(audit_count(&pool, "ssh_key.remove").await, 1);
    }
}

gantry_testkit::timed_test! {
    async fn bad_short_huge_and_duplicate_keys_are_refused_with_the_reason() {
        let Install { dir: _dir, pool } = Install::new().await;
        let keys = tempfile::tempdir().unwrap();
        let alice = user(&pool, "alice").await;
        let bob = user(&pool, "bob").await;
        let (ed, _) = keygen(keys.path(), "ed", "ed25519", None);
        let (short, _) = keygen(keys.path(), "short", "rsa", Some(2048));
        ssh_keys::add(&pool, &alice, "mine", &ed).await.unwrap();
        let before = ssh_keys::list(&pool, &alice).await.unwrap();
        let refusal = |r: Result<ssh_keys::SshKeyView, PlatformError>| r.unwrap_err().to_string();
        let huge = format!("ssh-ed25519 {}", "A".repeat(100 * 1024));
        let cases = [
            (refusal(ssh_keys::add(&pool, &alice, "", "not a key at all").await), "not an OpenSSH public key"),
            (refusal(ssh_keys::add(&pool, &alice, "", &huge).await), "100 KB"),
            (refusal(ssh_keys::add(&pool, &alice, "", &short).await), "2048 bits; RSA keys need at least 3072"),
            (refusal(ssh_keys::add(&pool, &alice, "again", &ed).await), "already on your account"),
            (refusal(ssh_keys::add(&pool, &bob, "stolen", &ed).await), "belongs to another account"),
        ];
        for (said, wanted) in cases {
            assert!(said.contains(wanted), "refusal {said:?} should say {wanted:?}");
            assert!(!said.contains("alice"), "does not say whose key it is: {said}");
        }
        assert_eq!(ssh_keys::list(&pool, &alice).await.unwrap(), before, "nothing changed");
        assert!(ssh_keys::list(&pool, &bob).await.unwrap().is_empty());
        assert_eq!(audit_count(&pool, "ssh_key.add").await, 1);
        // Someone else's key cannot be removed (nor told apart from none).
        let mine = before[0].id;
        assert!(matches!(ssh_keys::remove(&pool, &bob, mine).await, Err(PlatformError::NotFound(_))));
        assert_eq!(ssh_keys::list(&pool, &alice).await.unwrap(), before);
    }
}
