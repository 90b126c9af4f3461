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

/// The page's live mark: place the returned view in the page. `busy` is
/// read on the server inside its own `<Suspense>`, so the page's render
/// waits for the resource it reads.
pub fn poll(busy: Signal<bool>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || view! { <span hidden data-live=if busy.get() { "busy" } else { "idle" }></span> }}
        </Suspense>
    }
}

/// A page's resource whose answer is a server function's.
pub type Polled<T> = Resource<Result<T, crate::error::AppError>>;

/// Whether `check` holds for the resource's answer: the `busy` of [`poll`].
pub fn busy_when<T>(resource: Polled<T>, check: impl Fn(&T) -> bool + Send + Sync + 'static) -> Signal<bool>
where
    T: Send + Sync + 'static,
{
    Signal::derive(move || resource.with(|r| r.as_ref().and_then(|r| r.as_ref().ok()).is_some_and(&check)))
}
