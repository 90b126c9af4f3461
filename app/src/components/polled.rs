//! Reading a polled resource from outside the page's `<Transition>`.
//!
//! The poll timer and a chart's "keep the last good answer" need the
//! resource's latest value, but a read outside Suspense is one hydration
//! cannot wait for: in the browser it may see nothing yet where the server
//! saw data, and Leptos warns about every such read in debug builds. So the
//! timer reads a signal an effect keeps, and the charts read the resource
//! inside their `<Transition>`, remembering the last good answer there.

use crate::error::AppError;
use leptos::prelude::*;

/// A polled resource whose answer is a server function's.
pub type Polled<T> = Resource<Result<T, AppError>>;

/// Whether `check` holds for the resource's latest good answer, as the
/// `busy` of [`super::poll::poll`]. Effects run only in the browser; the
/// server never polls.
pub fn busy_when<T>(resource: Polled<T>, check: impl Fn(&T) -> bool + 'static) -> Signal<bool>
where
    T: Send + Sync + 'static,
{
    let busy = RwSignal::new(false);
    Effect::new(move |_| {
        let now = resource.with(|r| r.as_ref().and_then(|r| r.as_ref().ok()).is_some_and(&check));
        if busy.get_untracked() != now {
            busy.set(now);
        }
    });
    busy.into()
}

/// The latest good answer (the one kept in `last` when the latest answer
/// is an error or not there yet) and the latest answer's error. Call it
/// inside the `<Transition>` that shows the data: a refetch that fails
/// keeps the last good data on screen.
pub fn last_good<T>(resource: Polled<T>, last: StoredValue<Option<T>>) -> (Option<T>, Option<String>)
where
    T: Clone + Send + Sync + 'static,
{
    resource.with(|r| match r {
        Some(Ok(data)) => {
            last.set_value(Some(data.clone()));
            (Some(data.clone()), None)
        }
        Some(Err(e)) => (last.get_value(), Some(e.to_string())),
        None => (last.get_value(), None),
    })
}
