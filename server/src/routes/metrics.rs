//! Telemetry settings of `gantry serve`, the sampler's start, and
//! `/metrics` in the Prometheus text format.
//!
//! Who may read `/metrics`: with `--metrics-token` set, any client sending
//! `Authorization: Bearer <token>`; without it, only clients on this host —
//! a loopback peer sending no proxy header at all, and only while the
//! server is not configured as being behind a proxy (`--trusted-proxy`, or
//! `--secure-cookies`, which means a TLS terminator is in front): a proxy
//! on the same host connects from loopback too, and one that adds no
//! `X-Forwarded-For` (stunnel, haproxy in TCP mode, nginx setting only
//! `X-Real-IP`) would otherwise open it to everyone. Anyone else gets 403.

use axum::{
    extract::{ConnectInfo, Request, State},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use clap::Args;
use gantry_core::telemetry::{Retention, HOUR_MS};
use gantry_platform::{
    db::Pool,
    telemetry::{self, overview, TelemetryConfig},
    PlatformError,
};
use std::{fmt::Write, net::SocketAddr, time::Duration};

#[derive(Debug, Clone, Args)]
pub struct TelemetryArgs {
    /// Seconds between GPU samples (1 to 60).
    #[arg(long, env = "GANTRY_TELEMETRY_INTERVAL_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub telemetry_interval_secs: u64,
    /// Hours raw samples are kept (reclaim and rebalancing read them; charts older than this read rollups).
    #[arg(long, env = "GANTRY_TELEMETRY_RAW_HOURS", default_value_t = 24, value_parser = clap::value_parser!(u64).range(1..=24 * 30))]
    pub telemetry_raw_hours: u64,
    /// Days 1-minute rollups are kept (1-hour rollups: 400 days).
    #[arg(long, env = "GANTRY_TELEMETRY_MINUTE_DAYS", default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=90))]
    pub telemetry_minute_days: u64,
    /// Bearer token that lets a client other than this host read /metrics.
    #[arg(long, env = "GANTRY_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
}

impl TelemetryArgs {
    pub fn config(&self) -> TelemetryConfig {
        TelemetryConfig {
            interval: Duration::from_secs(self.telemetry_interval_secs),
            keep: Retention {
                raw_ms: self.telemetry_raw_hours as i64 * HOUR_MS,
                minute_ms: self.telemetry_minute_days as i64 * 24 * HOUR_MS,
                hour_ms: 400 * 24 * HOUR_MS,
            },
        }
    }
}

static TOKEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Starts the sampler and records the /metrics token.
pub fn start(pool: &Pool, args: &TelemetryArgs) {
    let _ = TOKEN.set(args.metrics_token.clone().filter(|t| !t.is_empty()));
    let config = args.config();
    tracing::info!(
        interval_s = args.telemetry_interval_secs,
        raw_hours = args.telemetry_raw_hours,
        "GPU telemetry sampler started"
    );
    tokio::spawn(telemetry::service::run(pool.clone(), config));
}

/// `/metrics`, outside the page guard (it has its own rule, above), with
/// the token `start` recorded. `behind_proxy`: the server is configured as
/// reached through a proxy (`--trusted-proxy` or `--secure-cookies`), so a
/// loopback peer may be that proxy and proves nothing.
pub fn routes(pool: Pool, behind_proxy: bool) -> Router {
    routes_with(pool, TOKEN.get().cloned().flatten(), behind_proxy)
}

/// [`routes_with`] for a server not behind a proxy.
pub fn routes_with_token(pool: Pool, token: Option<String>) -> Router {
    routes_with(pool, token, false)
}

pub fn routes_with(pool: Pool, token: Option<String>, behind_proxy: bool) -> Router {
    Router::new().route("/metrics", get(metrics)).with_state((pool, Access { token, behind_proxy }))
}

/// What decides who reads `/metrics`.
#[derive(Clone)]
struct Access {
    token: Option<String>,
    behind_proxy: bool,
}

/// Headers a proxy adds (or a client that wants to look like one): any of
/// them means the request did not start on this host, whatever the peer.
const PROXY_HEADERS: [&str; 8] = [
    "forwarded",
    "via",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
    "cf-connecting-ip",
    "x-cluster-client-ip",
    "fastly-client-ip",
];

fn proxied(headers: &axum::http::HeaderMap) -> bool {
    PROXY_HEADERS.iter().any(|h| headers.contains_key(*h))
        || headers.keys().any(|k| k.as_str().starts_with("x-forwarded-"))
}

fn allowed(req: &Request, access: &Access) -> bool {
    if let Some(token) = &access.token {
        let sent = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(gantry_platform::tokens::bearer);
        return sent.is_some_and(|s| constant_time_eq(s.as_bytes(), token.as_bytes()));
    }
    if access.behind_proxy {
        return false;
    }
    let loopback = req.extensions().get::<ConnectInfo<SocketAddr>>().is_some_and(|c| c.0.ip().is_loopback());
    loopback && !proxied(req.headers())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn metrics(State((pool, access)): State<(Pool, Access)>, req: Request) -> Response {
    if !allowed(&req, &access) {
        let why = if access.token.is_none() && access.behind_proxy {
            "/metrics needs a token behind a proxy (--trusted-proxy or --secure-cookies): set --metrics-token (GANTRY_METRICS_TOKEN) and send it as a Bearer token"
        } else {
            "/metrics is open to this host only; set --metrics-token (GANTRY_METRICS_TOKEN) and send it as a Bearer token"
        };
        return (StatusCode::FORBIDDEN, why).into_response();
    }
    match render(&pool).await {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "/metrics failed");
            (StatusCode::SERVICE_UNAVAILABLE, "metrics unavailable; see the server log").into_response()
        }
    }
}

/// Label values escaped as the exposition format requires.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// The whole exposition: per-GPU gauges from the latest readings, nodes,
/// machines and tasks by state, and every group's quota.
///
/// A GPU without a current reading has no gauges at all — never sampled,
/// on a lost node, or whose latest reading is older than
/// `overview::stale_after_ms` (`overview::heatmap` drops those readings: a
/// gauge would report them as current). Prometheus then marks
/// the series stale instead of graphing a dead card's last value for
/// ever; `gantry_nodes{state="lost"}` says why they went.
pub async fn render(pool: &Pool) -> Result<String, PlatformError> {
    // Every gauge of a GPU comes from one reading, read in one statement.
    let cells = overview::heatmap(pool, gantry_platform::telemetry::now_ms()).await?;
    let mut out = String::new();
    let gpu_families: [(&str, &str); 5] = [
        ("gantry_gpu_utilization_percent", "GPU utilisation at the latest sample."),
        ("gantry_gpu_memory_used_bytes", "GPU memory in use at the latest sample."),
        ("gantry_gpu_memory_total_bytes", "GPU memory in total."),
        ("gantry_gpu_temperature_celsius", "GPU temperature at the latest sample."),
        ("gantry_gpu_power_watts", "GPU power draw at the latest sample."),
    ];
    for (i, (name, help)) in gpu_families.iter().enumerate() {
        family(&mut out, name, help);
        for c in cells.iter().filter(|c| c.util.is_some()) {
            let mib = |v: Option<i64>| (v.unwrap_or(0) * 1024 * 1024) as f64;
            let value = match i {
                0 => c.util.unwrap_or(0.0),
                1 => mib(c.mem_used_mb),
                2 => mib(c.mem_total_mb),
                3 => c.temp_c.unwrap_or(0.0),
                _ => c.power_w.unwrap_or(0.0),
            };
            let _ = writeln!(
                out,
                "{name}{{node=\"{}\",gpu=\"{}\",model=\"{}\",machine=\"{}\",group=\"{}\",simulated=\"{}\"}} {value}",
                esc(&c.node),
                c.idx,
                esc(&c.model),
                esc(c.machine.as_deref().unwrap_or("")),
                esc(c.group.as_deref().unwrap_or("")),
                c.simulated
            );
        }
    }
    let counts = overview::counts(pool).await?;
    family(&mut out, "gantry_nodes", "Worker nodes by state.");
    for (state, n) in &counts.nodes {
        let _ = writeln!(out, "gantry_nodes{{state=\"{}\"}} {n}", esc(state));
    }
    family(&mut out, "gantry_machines", "Machines by state.");
    for (state, n) in &counts.machines {
        let _ = writeln!(out, "gantry_machines{{state=\"{}\"}} {n}", esc(state));
    }
    family(&mut out, "gantry_tasks", "Tasks by state.");
    for (state, n) in &counts.tasks {
        let _ = writeln!(out, "gantry_tasks{{state=\"{}\"}} {n}", esc(state));
    }
    family(&mut out, "gantry_group_gpu_quota", "GPUs a group may hold at once.");
    for (group, quota, _) in &counts.groups {
        let _ = writeln!(out, "gantry_group_gpu_quota{{group=\"{}\"}} {quota}", esc(group));
    }
    family(&mut out, "gantry_group_gpus_in_use", "GPUs a group holds now.");
    for (group, _, used) in &counts.groups {
        let _ = writeln!(out, "gantry_group_gpus_in_use{{group=\"{}\"}} {used}", esc(group));
    }
    Ok(out)
}
