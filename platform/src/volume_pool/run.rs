//! The background loop that keeps the pool full: woken by every claim in
//! this process (and every `every` for claims by other processes sharing
//! the node), it waits for a burst of creates to pass, then formats the
//! missing images one at a time on a blocking thread.

use super::{fill::fill_one, sweep, PoolConfig};
use crate::executor::loopdev;
use futures_util::FutureExt;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::Notify;

/// How long after the last claim the refill waits: the creates of a burst
/// (their containers made and started after the claim) get the CPU and the
/// disk, not the `mkfs` and `fsync` behind them.
const QUIET: Duration = Duration::from_secs(2);
/// The longest a steady stream of claims can put the refill off.
const QUIET_AT_MOST: Duration = Duration::from_secs(10);

fn wake() -> &'static Notify {
    static WAKE: OnceLock<Notify> = OnceLock::new();
    WAKE.get_or_init(Notify::new)
}

/// Called by a successful claim; a claim while a pass runs is kept (a
/// stored permit) and starts the next one.
pub(super) fn claimed() {
    wake().notify_one();
}

/// Runs until the process ends. Nothing to undo at shutdown: pool images
/// are never attached to loop devices, and an interrupted `mkfs` leaves a
/// partial that the next start's sweep deletes (its maker's pid is dead).
pub async fn run(cfg: PoolConfig, every: Duration) {
    run_until(cfg, every, std::future::pending()).await
}

/// [`run`] until `stop` completes. It returns only between two images, so
/// nothing is written in the pool once it has returned (the bench and the
/// tests then delete the directory).
pub async fn run_until(cfg: PoolConfig, every: Duration, stop: impl std::future::Future<Output = ()>) {
    if !cfg.enabled() {
        tracing::info!(
            "volume pool off (--volume-pool-size, --volume-pool-disk-budget-gb or the size classes are empty)"
        );
        return;
    }
    if let Err(why) = loopdev::enabled() {
        tracing::info!("volume pool off: no block volumes ({why})");
        return;
    }
    if let Err(e) = std::fs::create_dir_all(&cfg.volume_dir) {
        tracing::warn!("volume pool off: cannot create {}: {e}", cfg.volume_dir.display());
        return;
    }
    tracing::info!(classes = ?cfg.classes, per_class = cfg.per_class, budget_bytes = cfg.budget_bytes, dir = %super::pool_dir(&cfg.volume_dir).display(), "volume pool on");
    let mut stop = std::pin::pin!(stop.fuse());
    loop {
        let c = cfg.clone();
        match tokio::task::spawn_blocking(move || sweep(&c)).await {
            Ok(0) | Err(_) => {}
            Ok(n) => tracing::info!(
                removed = n,
                "volume pool: removed images a dead maker left or of sizes no longer pooled"
            ),
        }
        while (&mut stop).now_or_never().is_none() {
            let c = cfg.clone();
            match tokio::task::spawn_blocking(move || fill_one(&c)).await {
                Ok(Ok(Some(_))) => continue,
                Ok(Ok(None)) => break,
                Ok(Err(why)) => {
                    tracing::warn!("volume pool: cannot make an image ({why}); creates format their own meanwhile");
                    break;
                }
                Err(e) => {
                    tracing::warn!("volume pool: worker thread failed: {e}");
                    break;
                }
            }
        }
        tokio::select! {
            _ = &mut stop => return,
            _ = wake().notified() => {}
            _ = tokio::time::sleep(every) => {}
        }
        tokio::select! {
            _ = &mut stop => return,
            _ = settle() => {}
        }
    }
}

/// Returns once no claim came for [`QUIET`], or after [`QUIET_AT_MOST`].
async fn settle() {
    let _ = tokio::time::timeout(QUIET_AT_MOST, async {
        while tokio::time::timeout(QUIET, wake().notified()).await.is_ok() {}
    })
    .await;
}
