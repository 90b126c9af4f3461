//! Live pages without a reload: a counter that the page's resources depend
//! on, bumped in the browser every 2 s while something on the page is still
//! changing (and every 10 s otherwise, to catch changes nobody asked for,
//! such as a container that died). The server renders the current state
//! once; without JavaScript a reload shows the news.
//!
//! A hidden tab does not refetch; when it becomes visible again, a check
//! it skipped happens at once. A page that marks its fetch with [`tracked`]
//! never has two refreshes in flight: a tick that comes while one runs is
//! skipped. Every refresh bumps `data-polls` on `<body>`, so a test can
//! wait for polls by counting instead of sleeping.

use leptos::prelude::*;
use std::{cell::Cell, future::Future, rc::Rc, time::Duration};

/// Seconds between checks while `busy`.
pub const BUSY_SECS: u64 = 2;
/// Checks while idle happen every this many busy periods.
pub const IDLE_EVERY: u32 = 5;

/// Increases `tick` whenever the page should refetch; the page's resources
/// read `tick`, and `busy` (usually derived from them) says whether
/// anything shown is still changing.
pub fn poll(tick: RwSignal<u64>, busy: Signal<bool>) {
    poll_guarded(tick, busy, RwSignal::new(false));
}

/// Runs a page's fetch with `in_flight` set, for [`poll_guarded`].
pub async fn tracked<T>(in_flight: RwSignal<bool>, fetch: impl Future<Output = T>) -> T {
    in_flight.set(true);
    let out = fetch.await;
    in_flight.set(false);
    out
}

/// [`poll`] that skips ticks while `in_flight` (set by [`tracked`]).
pub fn poll_guarded(tick: RwSignal<u64>, busy: Signal<bool>, in_flight: RwSignal<bool>) {
    // Effects run only in the browser, after hydration.
    Effect::new(move |_| {
        let periods = Rc::new(Cell::new(0u32));
        // A check came due while the tab was hidden.
        let missed = Rc::new(Cell::new(false));
        let refresh = move || {
            if in_flight.get_untracked() {
                return;
            }
            tick.update(|t| *t += 1);
            if let Some(body) = document().body() {
                let n = body.get_attribute("data-polls").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                let _ = body.set_attribute("data-polls", &(n + 1).to_string());
            }
        };
        let handle = {
            let (periods, missed) = (periods.clone(), missed.clone());
            set_interval_with_handle(
                move || {
                    let n = periods.get().wrapping_add(1);
                    periods.set(n);
                    if busy.get_untracked() || n % IDLE_EVERY == 0 {
                        if document().hidden() {
                            missed.set(true);
                        } else {
                            refresh();
                        }
                    }
                },
                Duration::from_secs(BUSY_SECS),
            )
        };
        let visible = window_event_listener_untyped("visibilitychange", move |_| {
            if !document().hidden() && missed.replace(false) {
                periods.set(0);
                refresh();
            }
        });
        on_cleanup(move || {
            if let Ok(handle) = handle {
                handle.clear();
            }
            visible.remove();
        });
    });
}
