//! Per-row forms shown from a refetched resource, keeping what was typed.
//!
//! Leptos bumps an action's `version` whenever its call answers — refused
//! or not — and a resource keyed on it refetches. A list rendered from each
//! answer with `map(..).collect_view()` is patched onto the same elements
//! position by position, every attribute set again: what was typed into
//! the third row stays in the third row even when a row added above makes
//! it another group's (or user's) form, and a `<select>` goes back to its
//! `selected` option. So pages show such lists with a keyed `<For>`: the
//! key is the row's id and a revision that moves when that row's data
//! changed. A row whose data is the same keeps its elements, and what was
//! typed; a save that changed a row rebuilds that row from the stored
//! values (with its new `policy_rev` and the like).
//!
//! These are derived signals that read the resource afresh on every read,
//! never memos. On the server a resource resolves on another thread, and a
//! `Memo` that was computing when it did marks itself clean after that
//! change marked it dirty: it keeps "not loaded" for good. The server then
//! rendered the list as empty — no Users table — while the browser,
//! hydrating from the resolved data, expected the table; hydration stopped
//! there and the table never came (the test below shows the lost update).
//! For the same reason pages hide a list that has no data yet (`hidden`,
//! or `display: none`) rather than leave it out with `<Show>`, whose
//! condition is a memo.
//! Only the revisions and the last good answer are stored, in plain
//! `StoredValue`s, so a read after any answer sees that answer.
//!
//! Call these inside the `<Transition>` that shows the data, so their reads
//! of the resource count for it (the server render waits for them).

use crate::error::AppError;
use leptos::prelude::*;
use std::{collections::HashMap, hash::Hash, sync::Arc};

/// The latest good answer's data, kept while a refetch runs or after one
/// fails, and the latest answer's error (`None` once one succeeds).
pub struct Kept<T: Send + Sync + 'static> {
    pub data: Signal<Option<T>>,
    pub error: Signal<Option<AppError>>,
}

impl<T: Send + Sync + 'static> Clone for Kept<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Send + Sync + 'static> Copy for Kept<T> {}

/// `answer` reads the page's resource(s): `None` while not loaded.
pub fn kept<T>(answer: impl Fn() -> Option<Result<T, AppError>> + Send + Sync + 'static) -> Kept<T>
where
    T: Clone + Send + Sync + 'static,
{
    let answer = Arc::new(answer);
    let last_good = StoredValue::new(None::<T>);
    let data = Signal::derive({
        let answer = Arc::clone(&answer);
        move || match answer() {
            Some(Ok(now)) => {
                last_good.set_value(Some(now.clone()));
                Some(now)
            }
            _ => last_good.get_value(),
        }
    });
    let error = Signal::derive(move || answer().and_then(Result::err));
    Kept { data, error }
}

/// One row for a keyed `<For>`: `key` is (its id, its data's revision).
#[derive(Clone, Debug, PartialEq)]
pub struct KeptRow<K, T> {
    pub key: (K, u32),
    pub data: T,
}

/// The rows of `answer` with their keys (`id_of`: a row's id, unique in
/// the list).
pub fn kept_rows<K, T>(
    answer: impl Fn() -> Option<Result<Vec<T>, AppError>> + Send + Sync + 'static,
    id_of: fn(&T) -> K,
) -> Kept<Vec<KeptRow<K, T>>>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
    T: Clone + PartialEq + Send + Sync + 'static,
{
    let list = kept(answer);
    // The keys last handed out: the same data read again gets the same keys.
    let last_keyed = StoredValue::new(Vec::<KeptRow<K, T>>::new());
    let data = Signal::derive(move || {
        list.data.get().map(|now| {
            let rows = last_keyed.with_value(|last| revise(last, now, id_of));
            last_keyed.set_value(rows.clone());
            rows
        })
    });
    Kept { data, error: list.error }
}

/// Each row of `now` keyed by its id and a revision: the one it had in
/// `last` if its data is the same, the next one if it changed, 0 if new.
fn revise<K: Clone + Eq + Hash, T: PartialEq>(
    last: &[KeptRow<K, T>],
    now: Vec<T>,
    id_of: fn(&T) -> K,
) -> Vec<KeptRow<K, T>> {
    let before: HashMap<&K, &KeptRow<K, T>> = last.iter().map(|r| (&r.key.0, r)).collect();
    now.into_iter()
        .map(|data| {
            let id = id_of(&data);
            let rev = match before.get(&id) {
                Some(r) if r.data == data => r.key.1,
                Some(r) => r.key.1.wrapping_add(1),
                None => 0,
            };
            KeptRow { key: (id, rev), data }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(rows: &[KeptRow<i64, (i64, &'static str)>]) -> Vec<(i64, u32)> {
        rows.iter().map(|r| r.key).collect()
    }

    #[test]
    fn only_a_changed_row_gets_a_new_key() {
        let id = |r: &(i64, &'static str)| r.0;
        let first = revise(&[], vec![(1, "a"), (2, "b")], id);
        assert_eq!(keys(&first), [(1, 0), (2, 0)]);
        // The same answer again (a refused save): the same keys.
        let same = revise(&first, vec![(1, "a"), (2, "b")], id);
        assert_eq!(keys(&same), [(1, 0), (2, 0)]);
        // Row 2 saved, a row 3 added above: row 1 keeps its key.
        let saved = revise(&same, vec![(3, "c"), (1, "a"), (2, "B")], id);
        assert_eq!(keys(&saved), [(3, 0), (1, 0), (2, 1)]);
    }

    #[test]
    fn a_failed_refresh_keeps_the_last_good_rows_and_says_why() {
        let owner = Owner::new();
        owner.set();
        let resource = ArcRwSignal::new(Some(Ok(vec![(1, "a")])));
        let rows = kept_rows(
            {
                let resource = resource.clone();
                move || resource.get()
            },
            |r: &(i64, &'static str)| r.0,
        );
        assert_eq!(rows.data.get().map(|r| keys(&r)), Some(vec![(1, 0)]));
        resource.set(Some(Err(AppError::Internal("down".into()))));
        assert_eq!(rows.data.get().map(|r| keys(&r)), Some(vec![(1, 0)]));
        assert!(rows.error.get().is_some());
        resource.set(Some(Ok(vec![(2, "b"), (1, "a")])));
        assert_eq!(rows.data.get().map(|r| keys(&r)), Some(vec![(2, 0), (1, 0)]));
        assert_eq!(rows.error.get(), None);
    }

    /// On the server a resource resolves on another thread, and can do so
    /// while the page is reading it: that answer must still be shown (the
    /// server would otherwise render the page without the rows the browser
    /// then hydrates, and hydration stops there).
    #[test]
    fn an_answer_that_lands_while_the_rows_are_being_read_is_shown() {
        use std::sync::{
            atomic::{AtomicBool, Ordering},
            mpsc, Arc, Mutex,
        };
        let owner = Owner::new();
        owner.set();
        type Answer = Option<Result<Vec<(i64, &'static str)>, AppError>>;
        let resource = ArcRwSignal::new(None::<Result<Vec<(i64, &'static str)>, AppError>>);
        let (read_tx, read_rx) = mpsc::channel::<()>();
        let (landed_tx, landed_rx) = mpsc::channel::<()>();
        let (read_tx, landed_rx) = (Mutex::new(read_tx), Mutex::new(landed_rx));
        let first_read = Arc::new(AtomicBool::new(true));
        let rows = kept_rows(
            {
                let resource = resource.clone();
                move || -> Answer {
                    let now = resource.get();
                    if first_read.swap(false, Ordering::SeqCst) {
                        // Not loaded when read; the answer lands before this read ends.
                        read_tx.lock().unwrap().send(()).unwrap();
                        landed_rx.lock().unwrap().recv_timeout(HANG_GUARD).expect("the resolving thread hung");
                    }
                    now
                }
            },
            |r: &(i64, &'static str)| r.0,
        );
        let resolver = std::thread::spawn({
            let resource = resource.clone();
            move || {
                read_rx.recv_timeout(HANG_GUARD).expect("the rows were never read");
                resource.set(Some(Ok(vec![(1, "a"), (2, "b")])));
                landed_tx.send(()).unwrap();
            }
        });
        assert_eq!(rows.data.get(), None);
        resolver.join().unwrap();
        assert_eq!(rows.data.get().map(|r| keys(&r)), Some(vec![(1, 0), (2, 0)]));
    }

    /// Only so that a broken test fails instead of hanging the run.
    const HANG_GUARD: std::time::Duration = std::time::Duration::from_secs(60);
}
