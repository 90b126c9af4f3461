//! One pass of a background loop, contained. The server's loops (matcher
//! and watcher, reclaim, reconcile, node monitor, telemetry, dataset sweep,
//! throttle prune) run for as long as the process does; a panic in one pass
//! — a bug, an `unwrap` on data nobody expected — would otherwise end its
//! loop for good while the server kept answering, and compute tasks would
//! wait, idle GPUs stay held, or uploads never expire until a restart. Each
//! pass runs on a task of its own: a panic is logged and the loop goes on
//! at its next tick.

use std::future::Future;
use tokio::task::JoinHandle;

/// Runs `pass` on its own task and waits for it. `None` (logged as an
/// error naming `what`) if it panicked. Dropping the returned future
/// aborts the pass, as dropping the loop did before.
pub async fn pass<T: Send + 'static>(what: &'static str, pass: impl Future<Output = T> + Send + 'static) -> Option<T> {
    let mut task = AbortOnDrop(tokio::spawn(pass));
    match (&mut task.0).await {
        Ok(done) => Some(done),
        Err(e) if e.is_panic() => {
            let why = panic_message(e.into_panic());
            tracing::error!(pass = what, panic = %why, "a background pass panicked; its loop goes on at the next tick");
            None
        }
        // Cancelled: only by the runtime shutting down.
        Err(_) => None,
    }
}

struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => payload.downcast_ref::<&str>().map_or_else(|| "(not a message)".to_string(), |s| s.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };

    gantry_testkit::timed_test! {
    async fn a_loop_whose_pass_panics_runs_its_next_pass() {
        let runs = Arc::new(AtomicUsize::new(0));
        let mut results = Vec::new();
        for _ in 0..3 {
            let runs = runs.clone();
            results.push(
                pass("test", async move {
                    if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                        panic!("the first pass fails");
                    }
                    "done"
                })
                .await,
            );
        }
        assert_eq!(results, [None, Some("done"), Some("done")]);
    }
    }

    gantry_testkit::timed_test! {
    async fn dropping_the_loop_stops_its_pass() {
        let (started, on_start) = tokio::sync::oneshot::channel();
        let (dropped, on_drop) = tokio::sync::oneshot::channel::<()>();
        struct Says(Option<tokio::sync::oneshot::Sender<()>>);
        impl Drop for Says {
            fn drop(&mut self) {
                let _ = self.0.take().unwrap().send(());
            }
        }
        let looping = tokio::spawn(pass("test", async move {
            let _says = Says(Some(dropped));
            let _ = started.send(());
            std::future::pending::<()>().await
        }));
        on_start.await.unwrap();
        looping.abort();
        on_drop.await.expect("the pass was stopped");
    }
    }

    #[test]
    fn panic_messages_are_read_from_both_kinds_of_payload() {
        assert_eq!(panic_message(Box::new("static")), "static");
        assert_eq!(panic_message(Box::new(String::from("formatted 1"))), "formatted 1");
        assert_eq!(panic_message(Box::new(7)), "(not a message)");
    }
}
