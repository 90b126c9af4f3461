//! Reading a polled resource from outside the page's `<Transition>`.
//!
//! The poll timer and a chart's "keep the last good answer" need the
//! resource's latest value, but a read outside Suspense is one hydration
//! cannot wait for: in the browser it may see nothing yet where the server
//! saw data, and Leptos warns about every such read in debug builds. So the
//! timer reads a signal an effect keeps, and the charts read the resource
//! inside their `<Transition>`, remembering the last good answer there.

use crate::{components::stable::stable, error::AppError};
use leptos::prelude::*;

/// A polled resource whose answer is a server function's.
pub type Polled<T> = Resource<Result<T, AppError>>;

/// Whether `check` holds for the resource's answer, as the `busy` of
/// [`super::poll::poll`] (read on the server, inside its `<Suspense>`).
pub fn busy_when<T>(resource: Polled<T>, check: impl Fn(&T) -> bool + Send + Sync + 'static) -> Signal<bool>
where
    T: Send + Sync + 'static,
{
    Signal::derive(move || resource.with(|r| r.as_ref().and_then(|r| r.as_ref().ok()).is_some_and(&check)))
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

/// A detail page's view of its polled resource, built once per thing it
/// shows (a machine, a task) rather than on every answer. While a refetch
/// runs the resource may read as not loaded: `outcome` keeps the last one
/// then, or the whole view would be torn down and rebuilt. A refetch that
/// fails for a passing reason (the network, a busy server) keeps it too —
/// the page stays as it was, with what the user ticked, typed or scrolled,
/// and `refresh_failed` says it could not refresh; only "not found"
/// (deleted, or no longer visible) replaces it. `data`: the latest good
/// answer. Call it inside the `<Transition>` that shows the page, so the
/// values' reads of the resource count for it. They are [`stable`]: memos
/// in the browser, read afresh on the server (where a memo can miss an
/// answer that lands while it computes).
pub struct KeptDetail<T: Send + Sync + 'static> {
    pub outcome: Signal<Option<Result<i64, AppError>>>,
    pub refresh_failed: Signal<Option<String>>,
    pub data: Signal<Option<T>>,
}

pub fn kept_detail<T>(resource: Polled<T>, id_of: fn(&T) -> i64) -> KeptDetail<T>
where
    T: Clone + PartialEq + Send + Sync + 'static,
{
    let outcome = stable(move |prev: Option<&Option<Result<i64, AppError>>>| {
        let now = resource.with(|r| r.as_ref().map(|r| r.as_ref().map(id_of).map_err(Clone::clone)));
        match (now, prev.cloned().flatten()) {
            (None, last) => last,
            (Some(Err(e)), Some(Ok(id))) if !matches!(e, AppError::NotFound(_)) => Some(Ok(id)),
            (now, _) => now,
        }
    });
    let refresh_failed = stable(move |_| {
        resource.with(|r| match r {
            Some(Err(e)) if !matches!(e, AppError::NotFound(_)) => Some(e.to_string()),
            _ => None,
        })
    });
    let data = stable(move |prev: Option<&Option<T>>| {
        resource.with(|r| match r {
            Some(Ok(d)) => Some(d.clone()),
            _ => prev.cloned().flatten(),
        })
    });
    KeptDetail { outcome, refresh_failed, data }
}

/// The notice a [`KeptDetail`] page shows while its latest refetch failed.
#[component]
pub fn RefreshFailed(message: Signal<Option<String>>) -> impl IntoView {
    move || {
        message.get().map(|e| view! {
        <p class="notice small" role="status" data-testid="refresh-failed">"Could not refresh (" {e} "); showing the last known state."</p>
    })
    }
}
