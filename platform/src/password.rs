//! argon2id hashing on the blocking pool, behind a gate: a hash takes tens
//! of milliseconds of CPU and about 19 MiB, so a burst of anonymous sign-ins
//! must queue for a bounded number of slots (about two per core) instead of
//! taking hundreds of blocking threads and gigabytes. A request that waits
//! longer than the queue timeout is answered "busy" (429), not piled up.

use crate::PlatformError;
use argon2::{
    password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Argon2,
};
use std::{
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, LazyLock,
    },
    time::Duration,
};
use tokio::sync::Semaphore;

/// Bounds concurrent argon2 work and counts it (the counters let tests
/// assert the bound without timing).
#[derive(Debug)]
pub struct Gate {
    slots: Semaphore,
    size: usize,
    queue_timeout: Duration,
    started: AtomicU64,
    running: AtomicUsize,
    peak: AtomicUsize,
    waiting: AtomicUsize,
}

impl Gate {
    pub fn new(size: usize, queue_timeout: Duration) -> Arc<Gate> {
        let size = size.max(1);
        Arc::new(Gate {
            slots: Semaphore::new(size),
            size,
            queue_timeout,
            started: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
        })
    }

    /// The process-wide gate: two slots per core, five seconds of queue.
    pub fn shared() -> Arc<Gate> {
        static SHARED: LazyLock<Arc<Gate>> = LazyLock::new(|| {
            let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
            Gate::new(2 * cores, Duration::from_secs(5))
        });
        SHARED.clone()
    }

    pub fn size(&self) -> usize {
        self.size
    }
    /// argon2 computations started through this gate.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }
    /// The most that ever ran at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
    /// Computations waiting for a slot now (tests act while one waits).
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Takes one slot until the permit is dropped (maintenance, and tests
    /// that need a full gate without racing for it).
    pub async fn hold(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.slots.acquire().await.expect("the gate's semaphore is never closed")
    }

    async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<T, PlatformError> {
        let busy = PlatformError::Throttled { retry_after_secs: 1, busy: true };
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let slot = tokio::time::timeout(self.queue_timeout, self.slots.acquire()).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let _slot = match slot {
            Ok(Ok(slot)) => slot,
            _ => return Err(busy),
        };
        self.started.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let out = tokio::task::spawn_blocking(work).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        out.map_err(|e| PlatformError::Internal(format!("password work failed: {e}")))
    }
}

pub async fn hash(password: &str) -> Result<String, PlatformError> {
    hash_with(&Gate::shared(), password).await
}

pub async fn hash_with(gate: &Gate, password: &str) -> Result<String, PlatformError> {
    let password = password.to_owned();
    gate.run(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| PlatformError::Internal(format!("hashing failed: {e}")))
    })
    .await?
}

/// Checks `password` against a stored PHC string. A malformed hash counts as
/// a mismatch, never as a success.
pub async fn verify(stored: &str, password: &str) -> bool {
    verify_with(&Gate::shared(), stored, password).await.unwrap_or(false)
}

/// [`verify`] through `gate`; `Err` when the gate's queue timed out.
pub async fn verify_with(gate: &Gate, stored: &str, password: &str) -> Result<bool, PlatformError> {
    let (stored, password) = (stored.to_owned(), password.to_owned());
    gate.run(move || {
        PasswordHash::new(&stored)
            .map(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
            .unwrap_or(false)
    })
    .await
}

/// A valid hash of a random password, used to spend the same time on
/// unknown usernames as on known ones.
pub(crate) static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default().hash_password(b"not a password anyone has", &salt).map(|h| h.to_string()).unwrap_or_default()
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

    gantry_testkit::timed_test! {
        async fn the_gate_bounds_concurrent_work_and_refuses_past_its_queue() {
            let gate = Gate::new(2, Duration::from_secs(30));
            let h = hash_with(&gate, "pw-pw-pw-pw").await.unwrap();
            let all = (0..12).map(|_| {
                let (gate, h) = (gate.clone(), h.clone());
                tokio::spawn(async move { verify_with(&gate, &h, "pw-pw-pw-pw").await })
            });
            for r in futures_util::future::join_all(all).await {
                assert!(r.unwrap().unwrap());
            }
            assert_eq!(gate.started(), 13);
            assert!(gate.peak() <= 2, "peak {}", gate.peak());

            // No queue at all: with the only slot taken, the next is refused.
            let tight = Gate::new(1, Duration::ZERO);
            let held = tight.hold().await;
            let refused = verify_with(&tight, &h, "x").await.unwrap_err();
            assert!(matches!(refused, PlatformError::Throttled { busy: true, .. }), "{refused:?}");
            drop(held);
        }
    }
}
