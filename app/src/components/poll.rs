//! Live pages without a reload. The page is rendered on the server only;
//! `public/live.js` fetches it again and merges the new HTML into what is
//! shown, every 2 s while the page's mark says "busy" (something on it is
//! still changing) and every 10 s otherwise, to catch changes nobody asked
//! for (a container that died). A hidden tab does not refresh; a check it
//! skipped happens when it is shown again. Two refreshes never overlap, and
//! a refresh never overwrites what the user is typing or has ticked (see
//! live.js's `morph`). Every refresh bumps `data-polls` on `<body>`, so a
//! test can wait for polls by counting instead of sleeping. Without
//! JavaScript a reload shows the news.

use leptos::prelude::*;
use std::future::Future;

/// Seconds between checks while busy (live.js' `BUSY_MS`).
pub const BUSY_SECS: u64 = 2;
/// Checks while idle happen every this many busy periods (live.js' `IDLE_EVERY`).
pub const IDLE_EVERY: u32 = 5;

/// The page's live mark: place the returned view in the page. `busy` is
/// read on the server inside its own `<Suspense>`, so the page's render
/// waits for the resource it reads. `tick` is the page's refetch counter,
/// which nothing bumps any more: the whole page is fetched again instead.
pub fn poll(tick: RwSignal<u64>, busy: Signal<bool>) -> impl IntoView {
    let _ = tick;
    view! {
        <Suspense fallback=|| ()>
            {move || view! { <span hidden data-live=if busy.get() { "busy" } else { "idle" }></span> }}
        </Suspense>
    }
}

/// Runs a page's fetch (kept for the pages' resources; the server runs
/// each once per render).
pub async fn tracked<T>(in_flight: RwSignal<bool>, fetch: impl Future<Output = T>) -> T {
    let _ = in_flight;
    fetch.await
}

/// [`poll`], for pages that marked their fetch with [`tracked`].
pub fn poll_guarded(tick: RwSignal<u64>, busy: Signal<bool>, in_flight: RwSignal<bool>) -> impl IntoView {
    let _ = in_flight;
    poll(tick, busy)
}
