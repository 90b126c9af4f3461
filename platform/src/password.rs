//! argon2id hashing, run on the blocking pool: a hash takes tens of
//! milliseconds of CPU and must not stall the async workers.

use crate::PlatformError;
use argon2::{
    password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Argon2,
};

pub async fn hash(password: &str) -> Result<String, PlatformError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| PlatformError::Internal(format!("hashing failed: {e}")))
    })
    .await
    .map_err(|e| PlatformError::Internal(e.to_string()))?
}

/// Checks `password` against a stored PHC string. A malformed hash counts as
/// a mismatch, never as a success.
pub async fn verify(stored: &str, password: &str) -> bool {
    let (stored, password) = (stored.to_owned(), password.to_owned());
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&stored)
            .map(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

/// A valid hash of a random password, used to spend the same time on
/// unknown usernames as on known ones.
pub(crate) static DUMMY_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(b"not a password anyone has", &salt)
        .map(|h| h.to_string())
        .unwrap_or_default()
});

#[cfg(test)]
mod tests {
    use super::*;

    gantry_testkit::timed_test! {
        async fn hashes_are_argon2id_and_verify() {
            let h = hash("correct horse").await.unwrap();
            assert!(h.starts_with("$argon2id$"), "{h}");
            assert!(verify(&h, "correct horse").await);
            assert!(!verify(&h, "wrong horse").await);
            assert!(!verify("not a hash", "correct horse").await);
        }
    }

    gantry_testkit::timed_test! {
        async fn same_password_gets_different_salts() {
            assert_ne!(hash("pw-pw-pw-pw").await.unwrap(), hash("pw-pw-pw-pw").await.unwrap());
        }
    }
}
