//! Login throttling policy: after too many failures inside a window the key
//! (an account seen from one client, or a client address) is locked until
//! the window ends.
//!
//! Every attempt is counted *before* its password is checked (the platform
//! does it in one write transaction), so parallel guesses cannot all slip
//! past a check that has not seen the others yet: attempt number n is
//! verified only if n is within the allowance ([`ThrottlePolicy::admits`]).
//! A correct password forgives the account's count for that client.
//!
//! The per-account key includes the client, so a guesser elsewhere cannot
//! lock the real owner out: the owner's own client has its own count.

/// How many failures a key may collect in one window, and how long the
/// window lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThrottlePolicy {
    pub max_failures: u32,
    pub window_secs: i64,
}

impl ThrottlePolicy {
    /// Per account and client: a handful of typos, not a dictionary.
    pub const PER_ACCOUNT_CLIENT: ThrottlePolicy = ThrottlePolicy { max_failures: 5, window_secs: 15 * 60 };
    /// Older name of [`Self::PER_ACCOUNT_CLIENT`].
    pub const PER_USER: ThrottlePolicy = Self::PER_ACCOUNT_CLIENT;
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

    /// Whether the attempt whose counting produced `counted` may go on to
    /// verify its password: the first `max_failures` attempts of a window do.
    pub fn admits(&self, counted: FailureRecord, now: i64) -> Verdict {
        if counted.failures <= self.max_failures {
            Verdict::Allowed
        } else {
            Verdict::Locked { retry_after_secs: (counted.window_start + self.window_secs - now).max(1) }
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

/// The part of a client address that failures are counted against. One
/// IPv6 subscriber usually holds a whole /64 (2^64 addresses): counting
/// each address apart would give a guesser unlimited tries, so an IPv6
/// address counts as its /64. IPv4 (also IPv4-mapped IPv6) counts as itself;
/// anything that is not an address is kept as it is.
pub fn counted_address(addr: &str) -> String {
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                let net = std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0);
                format!("{net}/64")
            }
        },
        Ok(ip) => ip.to_string(),
        Err(_) => addr.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_count_by_their_64_and_ipv4_by_address() {
        assert_eq!(counted_address("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
        assert_eq!(
            counted_address("2001:db8:1:2:ffff:ffff:ffff:ffff"),
            "2001:db8:1:2::/64",
            "one subscriber, one count"
        );
        assert_ne!(counted_address("2001:db8:1:3::1"), counted_address("2001:db8:1:2::1"));
        assert_eq!(counted_address("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(counted_address("192.0.2.7"), "192.0.2.7");
        assert_eq!(counted_address("unknown"), "unknown");
    }

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

    #[test]
    fn counted_attempts_beyond_the_allowance_are_refused() {
        let mut rec = None;
        let mut allowed = 0;
        for _ in 0..10 {
            let counted = P.after_failure(rec, 10);
            rec = Some(counted);
            if P.admits(counted, 10) == Verdict::Allowed {
                allowed += 1;
            }
        }
        assert_eq!(allowed, 3);
        assert_eq!(P.admits(rec.unwrap(), 60), Verdict::Locked { retry_after_secs: 50 });
    }
}
