//! The background sampler of `gantry serve` and its writer: passes are
//! handed to a bounded queue and written in batches by one task, so neither
//! the sampler nor a page render ever waits on ingestion.

use super::{
    rollup,
    sampler::{self, Reading},
    store,
};
use crate::db::Pool;
use gantry_core::telemetry::{Retention, HOUR_MS};
use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, OnceLock,
    },
    time::Duration,
};
use tokio::sync::mpsc;

/// Sampling interval and retentions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelemetryConfig {
    pub interval: Duration,
    pub keep: Retention,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            interval: Duration::from_secs(10),
            keep: Retention { raw_ms: 24 * HOUR_MS, minute_ms: 8 * 24 * HOUR_MS, hour_ms: 400 * 24 * HOUR_MS },
        }
    }
}

static CONFIG: OnceLock<TelemetryConfig> = OnceLock::new();

/// The configuration the sampler runs with (the default before it starts):
/// queries need the interval and retentions to pick a resolution.
pub fn config() -> TelemetryConfig {
    CONFIG.get().copied().unwrap_or_default()
}

/// Passes waiting to be written; beyond this the newest pass is dropped
/// (and counted) rather than queued without bound.
const QUEUE_PASSES: usize = 64;

/// A pass committed this long after it was taken is logged.
const LATE_COMMIT_MS: i64 = 30_000;

/// The writer's queue.
#[derive(Clone)]
pub struct Ingest {
    tx: mpsc::Sender<Vec<Reading>>,
    pub dropped: Arc<AtomicU64>,
}

impl Ingest {
    /// Starts the writer task; it ends when every `Ingest` is dropped.
    pub fn start(pool: Pool) -> Ingest {
        let (tx, mut rx) = mpsc::channel::<Vec<Reading>>(QUEUE_PASSES);
        tokio::spawn(async move {
            while let Some(mut batch) = rx.recv().await {
                // Whatever queued up meanwhile goes in the same transaction.
                while let Ok(more) = rx.try_recv() {
                    batch.extend(more);
                }
                let oldest = batch.iter().map(|r| r.sample.at_ms).min().unwrap_or(0);
                let (pool, readings) = (pool.clone(), batch.len());
                match crate::contained::pass("telemetry writer", async move { sampler::write(&pool, &batch).await })
                    .await
                {
                    None => {}
                    Some(Err(e)) => tracing::warn!(error = %e, readings, "telemetry batch not written"),
                    // Charts show a pass only once it is committed: say so
                    // when that lags far behind the sampling.
                    Some(Ok(())) if super::now_ms() - oldest > LATE_COMMIT_MS => {
                        tracing::warn!(readings, lag_ms = super::now_ms() - oldest, "telemetry batch committed late")
                    }
                    Some(Ok(())) => {}
                }
            }
        });
        Ingest { tx, dropped: Arc::new(AtomicU64::new(0)) }
    }

    /// Queues a pass without waiting; false (and counted) when the writer
    /// is that far behind.
    pub fn submit(&self, readings: Vec<Reading>) -> bool {
        let ok = self.tx.try_send(readings).is_ok();
        if !ok {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }
}

/// Samples every `config.interval`, rolls up closed minutes and prunes
/// hourly, for as long as the server runs.
pub async fn run(pool: Pool, config: TelemetryConfig) {
    let _ = CONFIG.set(config);
    let ingest = Ingest::start(pool.clone());
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_prune = 0;
    loop {
        tick.tick().await;
        let now = super::now_ms();
        let prune = now - last_prune >= HOUR_MS;
        if prune {
            last_prune = now;
        }
        crate::contained::pass("telemetry", one_pass(pool.clone(), ingest.clone(), config, now, prune)).await;
    }
}

/// Samples once, rolls up, moves settled samples and, when `prune`, prunes.
async fn one_pass(pool: Pool, ingest: Ingest, config: TelemetryConfig, now: i64, prune: bool) {
    match sampler::collect(&pool, now).await {
        Ok(readings) => {
            if !ingest.submit(readings) {
                tracing::warn!("telemetry writer is behind: a sampling pass was dropped");
            }
        }
        Err(e) => tracing::warn!(error = %e, "telemetry sampling pass failed"),
    }
    if let Err(e) = rollup::roll_up(&pool, now, config.keep.raw_ms).await {
        tracing::warn!(error = %e, "telemetry rollup failed");
    }
    // Every ten minutes: a fraction of a second of writing for 1,000 GPUs.
    if let Err(e) = store::move_settled(&pool, store::settle_before(now)).await {
        tracing::warn!(error = %e, "moving settled telemetry samples failed");
    }
    if prune {
        match rollup::prune(&pool, now, config.keep).await {
            Ok(p) => tracing::debug!(?p, "telemetry pruned"),
            Err(e) => tracing::warn!(error = %e, "telemetry prune failed"),
        }
    }
}
