//! Terminal resizes, coalesced. Each resize is an engine request (and a
//! SIGWINCH in the container); a browser can send thousands a second (a
//! window dragged, or a script), so the input pump only records the newest
//! size and never waits for the engine: one resizer sends it, at most one
//! request at a time, skipping a size already sent. Keystrokes never queue
//! behind a slow engine's resize.

use gantry_platform::executor::inside::TtySize;
use std::future::Future;
use tokio::sync::watch;

/// The input pump's side: records the newest size wanted.
pub struct Wanted(watch::Sender<Option<TtySize>>);

/// The resizer's side.
pub struct Resizer(watch::Receiver<Option<TtySize>>);

pub fn channel() -> (Wanted, Resizer) {
    let (tx, rx) = watch::channel(None);
    (Wanted(tx), Resizer(rx))
}

impl Wanted {
    /// Records `size` as the one wanted now (replacing one not sent yet);
    /// false when it is the size already wanted.
    pub fn set(&self, size: TtySize) -> bool {
        self.0.send_if_modified(|cur| {
            let new = *cur != Some(size);
            *cur = Some(size);
            new
        })
    }
}

impl Resizer {
    /// Sends each newest size through `apply`, one at a time, for as long
    /// as the input pump lives (then it waits for ever: the session ends
    /// by another way). Sizes wanted while one is being applied collapse
    /// into the newest; a size equal to the last one applied is skipped.
    pub async fn run<F, Fut>(mut self, mut apply: F)
    where
        F: FnMut(TtySize) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut applied = None;
        while self.0.changed().await.is_ok() {
            let wanted = *self.0.borrow_and_update();
            if let Some(size) = wanted.filter(|s| applied != Some(*s)) {
                apply(size).await;
                applied = Some(size);
            }
        }
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::sync::Notify;

    fn size(cols: u16) -> TtySize {
        TtySize { cols, rows: 24 }
    }

    gantry_testkit::timed_test! {
        async fn a_burst_while_the_engine_is_slow_becomes_one_resize_to_the_newest_size() {
            let (wanted, resizer) = channel();
            let sent = Arc::new(Mutex::new(Vec::new()));
            let release = Arc::new(Notify::new());
            let entered = Arc::new(Notify::new());
            let (log, gate, inside) = (sent.clone(), release.clone(), entered.clone());
            let task = tokio::spawn(resizer.run(move |s| {
                let (log, gate, inside) = (log.clone(), gate.clone(), inside.clone());
                async move {
                    log.lock().unwrap().push(s.cols);
                    inside.notify_one();
                    gate.notified().await;
                }
            }));
            assert!(wanted.set(size(80)));
            // The first resize is in the engine; a hundred more come
            // meanwhile, and none of them waits for it.
            entered.notified().await;
            for cols in 1..=100 {
                wanted.set(size(cols));
            }
            assert!(!wanted.set(size(100)), "a repeat of the size wanted is no change");
            release.notify_one();
            entered.notified().await;
            assert_eq!(*sent.lock().unwrap(), vec![80, 100], "the newest size, once");
            release.notify_one();
            task.abort();
        }
    }
}
