//! Security settings of `gantry serve` and what the request guards need
//! from them: whether a reverse proxy's `X-Forwarded-For` is believed, how
//! long an idle session lives, the clock sessions are measured with (tests
//! move it), and the argon2 gate sign-ins queue on.

use clap::Args;
use gantry_platform::{password::Gate, tokens::TokenLifetime};
use std::sync::{
    atomic::{AtomicI64, Ordering},
    Arc,
};

#[derive(Debug, Clone, Args)]
pub struct SecurityArgs {
    /// Gantry is reached only through a reverse proxy that appends the
    /// client's address to X-Forwarded-For: count sign-in failures against
    /// that address instead of the proxy's. Leave off when clients can reach
    /// Gantry directly (they could then claim any address).
    #[arg(long, env = "GANTRY_TRUSTED_PROXY")]
    pub trusted_proxy: bool,
    /// A session ends after this many hours without a request (1 to 8760, a year).
    #[arg(long, env = "GANTRY_SESSION_IDLE_HOURS", default_value_t = 168, value_parser = clap::value_parser!(i64).range(1..=8760))]
    pub session_idle_hours: i64,
    /// A personal API token stops working this many days after it was made
    /// (1 to 3650); tokens made before a change keep their expiry.
    #[arg(long, env = "GANTRY_TOKEN_LIFETIME_DAYS", default_value_t = TokenLifetime::DEFAULT_DAYS, value_parser = clap::value_parser!(i64).range(1..=3650))]
    pub token_lifetime_days: i64,
    #[command(flatten)]
    pub api_rate: crate::routes::api_v1::rate_limit::ApiRateArgs,
}

/// Unix seconds: the system clock, or one a test sets and moves.
#[derive(Clone, Debug)]
pub enum Clock {
    System,
    Manual(Arc<AtomicI64>),
}

impl Clock {
    pub fn manual(start: i64) -> Clock {
        Clock::Manual(Arc::new(AtomicI64::new(start)))
    }
    pub fn now(&self) -> i64 {
        match self {
            Clock::System => gantry_platform::now(),
            Clock::Manual(t) => t.load(Ordering::SeqCst),
        }
    }
    /// Moves a manual clock on; the system clock moves by itself.
    pub fn advance(&self, secs: i64) {
        if let Clock::Manual(t) = self {
            t.fetch_add(secs, Ordering::SeqCst);
        }
    }
}

#[derive(Clone, Debug)]
pub struct Security {
    /// The OpenID Connect provider, discovered at start (`--oidc-issuer`).
    pub oidc: Option<Arc<gantry_platform::sso::oidc::Oidc>>,
    pub trusted_proxy: bool,
    pub session_idle_secs: i64,
    pub clock: Clock,
    pub gate: Arc<Gate>,
    /// How long a new API token lives (`--token-lifetime-days`).
    pub token_lifetime: TokenLifetime,
    /// The JSON API's per-token rate (`--api-rate-per-minute`, `--api-rate-burst`).
    pub api_limiter: crate::routes::api_v1::rate_limit::ApiLimiter,
}

impl Default for Security {
    fn default() -> Self {
        Security {
            oidc: None,
            trusted_proxy: false,
            session_idle_secs: 7 * 24 * 3600,
            clock: Clock::System,
            gate: Gate::shared(),
            token_lifetime: TokenLifetime::default(),
            api_limiter: Default::default(),
        }
    }
}

impl Security {
    pub fn from_args(args: &SecurityArgs) -> Security {
        Security {
            trusted_proxy: args.trusted_proxy,
            // The flag's range (1 to 8760) keeps this far from overflowing.
            session_idle_secs: args.session_idle_hours.clamp(1, 8760) * 3600,
            token_lifetime: TokenLifetime::days(args.token_lifetime_days.clamp(1, 3650)),
            api_limiter: crate::routes::api_v1::rate_limit::ApiLimiter::from_args(&args.api_rate),
            ..Security::default()
        }
    }

    /// A session's last-seen time is written at most this often: renewal
    /// costs one session write per period, not one per request.
    pub fn renew_after_secs(&self) -> i64 {
        (self.session_idle_secs / 20).clamp(1, 300)
    }
}
