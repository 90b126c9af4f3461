//! The per-token rate limit of the JSON API: each token may make
//! `--api-rate-per-minute` requests a minute on average, with bursts of
//! `--api-rate-burst` (GCRA, the `governor` crate, keyed by token id). Over
//! it: 429 `rate_limited` with `Retry-After` in whole seconds. Requests
//! with a browser session (the dataset pages' transfers) are not counted:
//! only a token is keyed.

use clap::Args;
use governor::{clock::Clock, DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::{num::NonZeroU32, sync::Arc};

#[derive(Debug, Clone, Args)]
pub struct ApiRateArgs {
    /// Requests a minute each API token may make on average (1 to 1000000).
    #[arg(long, env = "GANTRY_API_RATE_PER_MINUTE", default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub api_rate_per_minute: u32,
    /// Requests an API token may make at once above its rate (1 to 1000000).
    #[arg(long, env = "GANTRY_API_RATE_BURST", default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub api_rate_burst: u32,
}

/// One limiter per server (the tokens' ids are this database's), shared
/// by every request (a request extension; see `http::guard`).
#[derive(Clone)]
pub struct ApiLimiter(Arc<DefaultKeyedRateLimiter<i64>>);

impl std::fmt::Debug for ApiLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiLimiter")
    }
}

impl ApiLimiter {
    pub fn new(per_minute: u32, burst: u32) -> ApiLimiter {
        let per_minute = NonZeroU32::new(per_minute.max(1)).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
        ApiLimiter(Arc::new(RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst))))
    }

    pub fn from_args(args: &ApiRateArgs) -> ApiLimiter {
        ApiLimiter::new(args.api_rate_per_minute, args.api_rate_burst)
    }

    /// `Ok` if the token may go on; else the whole seconds to wait (at
    /// least 1, so a client that waits that long is let in).
    pub fn check(&self, token_id: i64) -> Result<(), u64> {
        match self.0.check_key(&token_id) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).map_err(|s: u64| s.max(1))
            }
        }
    }
}

impl Default for ApiLimiter {
    fn default() -> Self {
        ApiLimiter::new(600, 120)
    }
}
