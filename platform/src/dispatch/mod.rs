//! The master: claims scheduled tasks under a lease, drives each one on its
//! node's executor step by step, and records progress and outcome through
//! the transition module. Tasks of different machines run in parallel; one
//! machine's tasks never overlap, whichever process runs them.

mod context;
mod finish;
mod give_way;
mod reclaim_steps;
mod resumed;
mod steps;

use crate::{
    db::Pool,
    fleet::Fleet,
    now,
    transitions::{self, lease::LEASE_SECS, ClaimedTask},
    PlatformError,
};
use std::{future::Future, sync::Arc, time::Duration};
use tokio::{
    sync::{Notify, Semaphore},
    task::JoinSet,
};

pub use crate::transitions::lease::expire as expire_leases;

/// Tries for an operation whose engine is unreachable, before it gives up.
pub const MAX_ATTEMPTS: i64 = 5;

/// Called at every step boundary with the task and the step just reached;
/// `true` abandons the task there, exactly as if the process had died
/// (tests use it to interrupt the dispatcher at each boundary).
pub type StepHook = Arc<dyn Fn(&ClaimedTask, &'static str) -> bool + Send + Sync>;

#[derive(Clone)]
pub struct Dispatcher {
    pub pool: Pool,
    pub fleet: Fleet,
    pub wake: Arc<Notify>,
    pub parallel: usize,
    /// This process's lease owner id: new at every start.
    pub owner: Arc<str>,
    /// Seconds a claim holds without renewal.
    pub lease_secs: i64,
    pub hook: Option<StepHook>,
}

/// A lease owner id unique to this process start.
pub fn new_owner_id() -> Arc<str> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}-{}-{:08x}", host.trim(), std::process::id(), rand::random::<u32>()).into()
}

impl Dispatcher {
    pub fn new(pool: Pool, fleet: Fleet, wake: Arc<Notify>, parallel: usize) -> Dispatcher {
        Dispatcher {
            pool,
            fleet,
            wake,
            parallel: parallel.max(1),
            owner: new_owner_id(),
            lease_secs: LEASE_SECS,
            hook: None,
        }
    }

    /// Runs until the process ends.
    pub async fn run(self) {
        self.run_until(std::future::pending(), Duration::ZERO).await
    }

    /// Runs until `stop` resolves; then claims nothing more, gives the
    /// tasks in flight `grace` to finish, stops the rest where they are (as
    /// a crash would) and hands them back to the queue at once, so the next
    /// start resumes them without waiting for their leases to expire.
    pub async fn run_until(self, stop: impl Future<Output = ()>, grace: Duration) {
        let permits = Arc::new(Semaphore::new(self.parallel));
        let mut running = JoinSet::new();
        let mut last_expiry = 0;
        tokio::pin!(stop);
        loop {
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = self.pass(&permits, &mut running, &mut last_expiry) => {}
            }
            while running.try_join_next().is_some() {}
        }
        let finished =
            tokio::time::timeout(grace, async { while running.join_next().await.is_some() {} }).await.is_ok();
        if !finished {
            tracing::warn!(
                stopped = running.len(),
                "shutting down: stopping the tasks still running; they resume at the next start"
            );
        }
        running.shutdown().await;
        // A pass cut short may have claimed tasks it never started: those
        // are ours too, and go back with the rest.
        match transitions::lease::release_all(&self.pool, &self.owner).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(requeued = n, "shutting down: unfinished tasks handed back to the queue"),
            Err(e) => {
                tracing::error!(error = %e, "shutting down: could not hand tasks back; they resume when their leases expire")
            }
        }
    }

    /// One turn of the loop: requeue expired leases now and then, claim
    /// what there is room for and start it, or wait to be woken.
    async fn pass(&self, permits: &Arc<Semaphore>, running: &mut JoinSet<()>, last_expiry: &mut i64) {
        let now = now();
        // Tasks whose runner stopped renewing (a crashed process) come
        // back to the queue; cheap, so every few seconds is fine.
        if now - *last_expiry >= (self.lease_secs / 3).clamp(1, 5) {
            *last_expiry = now;
            match expire_leases(&self.pool, now).await {
                Ok(n) if n > 0 => {
                    tracing::warn!(requeued = n, "resuming tasks whose runner stopped")
                }
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "expiring leases failed"),
            }
        }
        let free = permits.available_permits();
        let claimed = if free > 0 {
            // Not `now`: the claim may wait for the write lock, and its
            // lease counts from when it got it.
            transitions::lease::claim(&self.pool, &self.owner, free as i64, self.lease_secs).await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "claiming tasks failed");
                Vec::new()
            })
        } else {
            Vec::new()
        };
        if claimed.is_empty() {
            // Woken by new tasks or finished ones; the timeout covers
            // retry backoffs and lease expiries coming due.
            let _ = tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await;
            return;
        }
        for task in claimed {
            let permit = permits.clone().acquire_owned().await.expect("semaphore never closes");
            let me = self.clone();
            running.spawn(async move {
                me.execute(task).await;
                drop(permit);
                me.wake.notify_one();
            });
        }
    }

    /// Runs one claimed task to its end (or back to `scheduled` for a
    /// retry), renewing its lease meanwhile. Losing the lease stops the
    /// work at once: another process owns the task now.
    pub async fn execute(&self, task: ClaimedTask) {
        let lease = Duration::from_secs(task.lease.secs.max(1) as u64);
        let every = lease / 3;
        let Some(claimed_at) = self.renewed_if_late(&task, every).await else {
            return;
        };
        let renewal = async {
            // The lease holds until `held_until` at least: counted from
            // before the clock the claim's or renewal's expiry was computed
            // from, which is read once the write is sure to go through
            // (the claim reads it after taking the write lock), so never
            // late. A renewal that has not got through by `every / 2`
            // before then — failing, or waiting on a stalled database —
            // ends the run: past it a successor may own the task, and this
            // runner must not touch the engine.
            let mut at = claimed_at;
            let mut held_until = at + lease;
            loop {
                tokio::time::sleep_until(at + every).await;
                at = tokio::time::Instant::now();
                let renewed = loop {
                    match tokio::time::timeout_at(
                        held_until - every / 2,
                        transitions::lease::renew(&self.pool, &task.lease, now()),
                    )
                    .await
                    {
                        Err(_) => break None,
                        Ok(Err(e)) => {
                            tracing::warn!(task = task.id, error = %e, "lease renewal failed; retrying");
                            tokio::time::sleep((every / 10).max(Duration::from_millis(100))).await;
                        }
                        Ok(Ok(held)) => break Some(held),
                    }
                };
                match renewed {
                    Some(true) => held_until = at + lease,
                    Some(false) => return,
                    None => {
                        tracing::warn!(
                            task = task.id,
                            "lease renewal did not get through before the lease would run out; stopping"
                        );
                        return;
                    }
                }
            }
        };
        tokio::pin!(renewal);
        let outcome = tokio::select! {
            outcome = steps::run(self, &task) => outcome,
            () = &mut renewal => {
                tracing::warn!(task = task.id, "lease lost; another process or an admin took the task over");
                return;
            }
        };
        // Still renewed while the outcome is recorded: giving up may call
        // the engine (removing a failed create's container) for longer
        // than the lease, and a lease lapsing then would let a successor
        // start while this runner removes its containers.
        tokio::select! {
            () = finish::record(self, &task, outcome) => {}
            () = &mut renewal => tracing::warn!(task = task.id, "lease lost while recording the outcome; the task's next runner decides it"),
        }
    }

    /// When the lease `task` holds counts from: its claim, or — for a task
    /// started a while after it (the tests' drive claims several and runs
    /// them one after the other) — a renewal made before anything is
    /// touched, since the claim's lease may be close to running out.
    /// `None`: the task is no longer ours, or the renewal did not get
    /// through; it resumes when its lease expires.
    async fn renewed_if_late(&self, task: &ClaimedTask, every: Duration) -> Option<tokio::time::Instant> {
        if task.claimed_at.elapsed() < every {
            return Some(task.claimed_at);
        }
        let at = tokio::time::Instant::now();
        match transitions::lease::renew(&self.pool, &task.lease, now()).await {
            Ok(true) => Some(at),
            Ok(false) => {
                tracing::warn!(
                    task = task.id,
                    "lease lost before the task started; another process or an admin took it over"
                );
                None
            }
            Err(e) => {
                tracing::warn!(task = task.id, error = %e, "lease not renewed before the task started; it resumes when the lease expires");
                None
            }
        }
    }

    /// The test hook at a step boundary.
    fn checkpoint(&self, task: &ClaimedTask, step: &'static str) -> Result<(), steps::StepError> {
        match &self.hook {
            Some(hook) if hook(task, step) => Err(steps::StepError::Abandoned(step)),
            _ => Ok(()),
        }
    }
}

/// Claims due tasks for `owner` with the default lease (tests drive the
/// dispatcher with it).
pub async fn claim(pool: &Pool, owner: &Arc<str>, limit: i64) -> Result<Vec<ClaimedTask>, PlatformError> {
    transitions::lease::claim(pool, owner, limit, LEASE_SECS).await
}
