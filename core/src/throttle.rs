//! Login throttling policy: after too many failures inside a window the key
//! (a username or a client address) is locked until the window ends.

/// How many failures a key may collect in one window, and how long the
/// window lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThrottlePolicy {
    pub max_failures: u32,
    pub window_secs: i64,
}

impl ThrottlePolicy {
    /// Per username: a handful of typos, not a dictionary.
    pub const PER_USER: ThrottlePolicy = ThrottlePolicy { max_failures: 5, window_secs: 15 * 60 };
    /// Per client address: many people may share one NAT address.
    pub const PER_ADDRESS: ThrottlePolicy = ThrottlePolicy { max_failures: 30, window_secs: 15 * 60 };
}

/// Failures recorded so far for one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailureRecord {
    pub failures: u32,
    pub window_start: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Locked { retry_after_secs: i64 },
}

impl ThrottlePolicy {
    /// May a login attempt proceed now?
    pub fn verdict(&self, record: Option<FailureRecord>, now: i64) -> Verdict {
        match record {
            Some(r) if now < r.window_start + self.window_secs && r.failures >= self.max_failures => {
                Verdict::Locked { retry_after_secs: r.window_start + self.window_secs - now }
            }
            _ => Verdict::Allowed,
        }
    }

    /// The record after one more failure at `now`; an expired window starts over.
    pub fn after_failure(&self, record: Option<FailureRecord>, now: i64) -> FailureRecord {
        match record {
            Some(r) if now < r.window_start + self.window_secs => {
                FailureRecord { failures: r.failures.saturating_add(1), window_start: r.window_start }
            }
            _ => FailureRecord { failures: 1, window_start: now },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: ThrottlePolicy = ThrottlePolicy { max_failures: 3, window_secs: 100 };

    #[test]
    fn locks_after_max_failures_until_window_ends() {
        let mut rec = None;
        for _ in 0..3 {
            assert_eq!(P.verdict(rec, 10), Verdict::Allowed);
            rec = Some(P.after_failure(rec, 10));
        }
        assert_eq!(P.verdict(rec, 10), Verdict::Locked { retry_after_secs: 100 });
        assert_eq!(P.verdict(rec, 109), Verdict::Locked { retry_after_secs: 1 });
        assert_eq!(P.verdict(rec, 110), Verdict::Allowed);
    }

    #[test]
    fn expired_window_starts_over() {
        let rec = Some(FailureRecord { failures: 3, window_start: 0 });
        assert_eq!(P.after_failure(rec, 500), FailureRecord { failures: 1, window_start: 500 });
    }

    #[test]
    fn failures_inside_window_accumulate() {
        let rec = Some(FailureRecord { failures: 1, window_start: 0 });
        assert_eq!(P.after_failure(rec, 99), FailureRecord { failures: 2, window_start: 0 });
    }
}
