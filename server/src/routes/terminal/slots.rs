//! Places for terminals (and followed or whole logs, counted apart): a
//! limit per server process and per user, checked and taken under one lock
//! and given back when the holder drops its [`Slot`].

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

/// This process's terminal slots: how many are taken, in all and by each
/// user. Counted apart from the registry, which learns of a terminal only
/// once its shell runs and its session is recorded.
#[derive(Clone, Default)]
pub struct Slots {
    taken: Arc<Mutex<Taken>>,
}

#[derive(Default)]
struct Taken {
    total: usize,
    by_user: HashMap<i64, usize>,
}

/// Why no slot was free: the server's limit or the user's.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    Server(usize),
    User(usize),
}

/// One taken slot, given back when dropped.
pub struct Slot {
    slots: Slots,
    user: i64,
}

impl Slots {
    /// Takes a slot for `user` if fewer than `max` are taken in all and
    /// fewer than `per_user` by this user; checked and taken under one lock.
    pub fn take(&self, user: i64, max: usize, per_user: usize) -> Result<Slot, Full> {
        let mut t = self.lock();
        if t.total >= max {
            return Err(Full::Server(max));
        }
        let mine = t.by_user.entry(user).or_insert(0);
        if *mine >= per_user {
            if *mine == 0 {
                t.by_user.remove(&user);
            }
            return Err(Full::User(per_user));
        }
        *mine += 1;
        t.total += 1;
        Ok(Slot { slots: self.clone(), user })
    }

    /// Slots taken in all and by `user`.
    pub fn taken(&self, user: i64) -> (usize, usize) {
        let t = self.lock();
        (t.total, t.by_user.get(&user).copied().unwrap_or(0))
    }

    /// Never poisoned for good: the counts are updated in one step each, so
    /// a panic elsewhere under the lock leaves them consistent.
    fn lock(&self) -> std::sync::MutexGuard<'_, Taken> {
        self.taken.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.slots.lock();
        t.total = t.total.saturating_sub(1);
        if let Some(n) = t.by_user.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.by_user.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Full, Slots};

    #[test]
    fn slots_hold_both_limits_and_come_back_on_drop() {
        let slots = Slots::default();
        let a1 = slots.take(1, 3, 2).unwrap();
        let a2 = slots.take(1, 3, 2).unwrap();
        assert_eq!(slots.take(1, 3, 2).err(), Some(Full::User(2)));
        let b1 = slots.take(2, 3, 2).unwrap();
        assert_eq!(slots.take(3, 3, 2).err(), Some(Full::Server(3)));
        assert_eq!(slots.taken(1), (3, 2));
        drop(a1);
        assert_eq!(slots.taken(1), (2, 1));
        let a3 = slots.take(1, 3, 2).unwrap();
        drop((a2, a3, b1));
        assert_eq!(slots.taken(1), (0, 0));
        assert!(slots.lock().by_user.is_empty(), "no counts left behind");
        // Given back on a panic's unwinding too.
        let s = slots.clone();
        let _ = std::panic::catch_unwind(move || {
            let _slot = s.take(5, 1, 1).unwrap();
            panic!("opening failed");
        });
        assert!(slots.take(5, 1, 1).is_ok());
    }
}
