//! Values computed from a resource that change only when their result does
//! — in the browser; on the server they are read afresh.
//!
//! In the browser a `Memo` is what keeps a polled page still: a view built
//! from one is rebuilt only when the value it shows changed (the machine
//! page's "keep the data volume" box stays the same element between polls).
//! On the server that same `Memo` can lose an answer: a resource resolves
//! on another thread, and a memo that was computing at that moment marks
//! itself clean after the answer marked it dirty, so it keeps "not loaded"
//! for good. The server then renders the page without data that the
//! serialized resource holds, and the browser's hydration stops there (see
//! also `kept_rows`). The server renders each page once, so filtering
//! equal values gives it nothing: there the value is a derived signal,
//! computed on every read, with its last result kept for `prev`.
//!
//! `<Show>` builds a memo of its condition, so a condition that reads a
//! resource uses [`StableShow`] instead.

use leptos::{
    children::{TypedChildrenFn, ViewFn},
    either::Either,
    prelude::*,
};

/// As `Memo::new(f)`: `f` gets its previous result (`None` the first time).
pub fn stable<T>(f: impl Fn(Option<&T>) -> T + Send + Sync + 'static) -> Signal<T>
where
    T: Clone + PartialEq + Send + Sync + 'static,
{
    #[cfg(feature = "ssr")]
    {
        let last = StoredValue::new(None::<T>);
        Signal::derive(move || {
            // Taken out first: no lock is held while `f` reads other signals.
            let prev = last.get_value();
            let now = f(prev.as_ref());
            last.set_value(Some(now.clone()));
            now
        })
    }
    #[cfg(not(feature = "ssr"))]
    {
        Memo::new(f).into()
    }
}

/// `<Show>` whose condition goes through [`stable`]: the children are
/// built when it turns true, not again while it stays true.
#[component(transparent)]
pub fn StableShow<W, C>(
    children: TypedChildrenFn<C>,
    when: W,
    #[prop(optional, into)] fallback: ViewFn,
) -> impl IntoView
where
    W: Fn() -> bool + Send + Sync + 'static,
    C: IntoView + 'static,
{
    let when = stable(move |_| when());
    let children = children.into_inner();
    move || match when.get() {
        true => Either::Left(children()),
        false => Either::Right(fallback.run()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_given_its_last_result() {
        let owner = Owner::new();
        owner.set();
        let source = RwSignal::new(Some(1));
        // What a page does while a refetch runs: keep the last answer.
        let kept = stable(move |prev: Option<&Option<i32>>| source.get().or_else(|| prev.copied().flatten()));
        assert_eq!(kept.get(), Some(1));
        source.set(None);
        assert_eq!(kept.get(), Some(1));
        source.set(Some(2));
        assert_eq!(kept.get(), Some(2));
    }

    /// On the server a resource resolves on another thread, and can do so
    /// while a value computed from it is being read: that answer must still
    /// be seen (the server would otherwise render the page without the
    /// data the browser then hydrates with, and hydration stops there).
    #[cfg(feature = "ssr")]
    #[test]
    fn an_answer_that_lands_while_the_value_is_computed_is_seen() {
        use std::sync::{
            atomic::{AtomicBool, Ordering},
            mpsc, Arc, Mutex,
        };
        let owner = Owner::new();
        owner.set();
        let resource = ArcRwSignal::new(None::<i64>);
        let (read_tx, read_rx) = mpsc::channel::<()>();
        let (landed_tx, landed_rx) = mpsc::channel::<()>();
        let (read_tx, landed_rx) = (Mutex::new(read_tx), Mutex::new(landed_rx));
        let first_read = Arc::new(AtomicBool::new(true));
        let loaded = stable({
            let resource = resource.clone();
            move |_| {
                let now = resource.get();
                if first_read.swap(false, Ordering::SeqCst) {
                    // Not loaded when read; the answer lands before this read ends.
                    read_tx.lock().unwrap().send(()).unwrap();
                    landed_rx.lock().unwrap().recv_timeout(HANG_GUARD).expect("the resolving thread hung");
                }
                now
            }
        });
        let resolver = std::thread::spawn({
            let resource = resource.clone();
            move || {
                read_rx.recv_timeout(HANG_GUARD).expect("the value was never read");
                resource.set(Some(7));
                landed_tx.send(()).unwrap();
            }
        });
        assert_eq!(loaded.get(), None);
        resolver.join().unwrap();
        assert_eq!(loaded.get(), Some(7));
    }

    /// Only so that a broken test fails instead of hanging the run.
    #[cfg(feature = "ssr")]
    const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(60);
}
