//! Every HTTP-level test of the server in one test binary.
//!
//! One binary instead of one per file: each of these links the whole
//! server and app (hundreds of MB with Leptos' view types), so one link
//! instead of eighteen saves minutes and gigabytes on a 2-core CI machine.
//! Run one group with `cargo test -p server --features app/ssr --test suite
//! security_signin::`. `datasets_memory` stays a binary of its own: it
//! measures this process's RSS, which other tests would disturb.

#[path = "../common/mod.rs"]
mod common;
#[path = "../datasets_support/mod.rs"]
mod datasets_support;
#[path = "../security_support/mod.rs"]
mod security_support;
#[path = "../telemetry_common/mod.rs"]
mod telemetry_common;

mod accounts_lifecycle;
mod api_v1;
mod dataset_mounts_http;
mod dataset_quotas_http;
mod datasets_http;
mod datasets_page_resume;
mod first_run;
mod http_admin;
mod http_auth;
mod http_machines;
mod lists;
mod metrics_http;
mod security_errors;
mod security_headers;
mod security_redirects;
mod security_sessions;
mod security_signin;
mod snapshots_http;
mod telemetry_pages;
mod terminal;
mod two_servers;
mod users_list;
