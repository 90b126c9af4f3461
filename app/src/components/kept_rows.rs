//! Per-row forms shown from a refetched resource, keeping what was typed.
//!
//! Leptos bumps an action's `version` whenever its call answers — refused
//! or not — and a resource keyed on it refetches. A list rendered from each
//! answer with `map(..).collect_view()` is patched onto the same elements
//! position by position, every attribute set again: what was typed into
//! the third row stays in the third row even when a row added above makes
//! it another group's (or user's) form, and a `<select>` goes back to its
//! `selected` option. So pages read such lists through these memos, which
//! change only when the data does, and show the rows with a keyed `<For>`:
//! the key is the row's id and a revision that moves when that row's data
//! changed. A row whose data is the same keeps its elements, and what was
//! typed; a save that changed a row rebuilds that row from the stored
//! values (with its new `policy_rev` and the like).
//!
//! Call these inside the `<Transition>` that shows the data, so their reads
//! of the resource count for it (the server render waits for them).

use crate::error::AppError;
use leptos::prelude::*;
use std::{collections::HashMap, hash::Hash};

/// The latest answer's data, kept while a refetch runs or after one
/// fails, and the latest answer's error (`None` once one succeeds).
pub struct Kept<T: Send + Sync + 'static> {
    pub data: Memo<Option<T>>,
    pub error: Memo<Option<AppError>>,
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
    T: Clone + PartialEq + Send + Sync + 'static,
{
    let answer = Memo::new(move |_| answer());
    let data = Memo::new(move |last: Option<&Option<T>>| match answer.get() {
        Some(Ok(now)) => Some(now),
        _ => last.cloned().flatten(),
    });
    let error = Memo::new(move |_| answer.with(|a| a.as_ref().and_then(|r| r.as_ref().err().cloned())));
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
pub fn kept_rows<K, T>(answer: impl Fn() -> Option<Result<Vec<T>, AppError>> + Send + Sync + 'static, id_of: fn(&T) -> K) -> Kept<Vec<KeptRow<K, T>>>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
    T: Clone + PartialEq + Send + Sync + 'static,
{
    let list = kept(answer);
    let rows = Memo::new(move |last: Option<&Option<Vec<KeptRow<K, T>>>>| {
        let last = last.and_then(Option::as_deref).unwrap_or_default();
        list.data.get().map(|now| revise(last, now, id_of))
    });
    Kept { data: rows, error: list.error }
}

/// Each row of `now` keyed by its id and a revision: the one it had in
/// `last` if its data is the same, the next one if it changed, 0 if new.
fn revise<K: Clone + Eq + Hash, T: PartialEq>(last: &[KeptRow<K, T>], now: Vec<T>, id_of: fn(&T) -> K) -> Vec<KeptRow<K, T>> {
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
}
