//! Live pages without a reload: a counter that the page's resources depend
//! on, bumped in the browser every 2 s while something on the page is still
//! changing (and every 10 s otherwise, to catch changes nobody asked for,
//! such as a container that died). The server renders the current state
//! once; without JavaScript a reload shows the news.

use leptos::prelude::*;
use std::{cell::Cell, time::Duration};

/// Seconds between checks while `busy`.
pub const BUSY_SECS: u64 = 2;
/// Checks while idle happen every this many busy periods.
pub const IDLE_EVERY: u32 = 5;

/// Increases `tick` whenever the page should refetch; the page's resources
/// read `tick`, and `busy` (usually derived from them) says whether
/// anything shown is still changing.
pub fn poll(tick: RwSignal<u64>, busy: Signal<bool>) {
    // Effects run only in the browser, after hydration.
    Effect::new(move |_| {
        let periods = Cell::new(0u32);
        let handle = set_interval_with_handle(
            move || {
                let n = periods.get().wrapping_add(1);
                periods.set(n);
                let hidden = document().hidden();
                if !hidden && (busy.get_untracked() || n % IDLE_EVERY == 0) {
                    tick.update(|t| *t += 1);
                }
            },
            Duration::from_secs(BUSY_SECS),
        );
        if let Ok(handle) = handle {
            on_cleanup(move || handle.clear());
        }
    });
}
