//! Every server integration test in one test binary (the real router,
//! SQLite, real Docker, child `gantry serve` processes), so the server —
//! some 500 MB of debug binary — is linked once rather than once per file:
//! a fresh build used to write 26 of them. Run one group with
//! `cargo test -p server --features app/ssr --test suite security_signin::`.
//! `datasets_memory` stays a binary of its own: it measures this process's
//! resident memory, which other tests running beside it would add to.
//!
//! What these tests share with the platform's (installations, the router on
//! port 0, signed-in clients, raw HTTP, the fault-injecting store) is in
//! `gantry-testkit`; `common`, `datasets_support` and `security_support`
//! are the server's own starts of it.

mod cli_support;
mod common;
mod datasets_support;
mod oidc_support;
mod security_support;

mod accounts_lifecycle;
mod api_account;
mod api_machines;
mod api_openapi;
mod api_rate_limit;
mod api_scopes;
mod api_shape;
mod api_v1;
mod audit_access;
mod cli_compute;
mod cli_datasets;
mod cli_login;
mod cli_machines;
mod dashboard_http;
mod dataset_mounts_http;
mod dataset_quotas_http;
mod datasets_access_ends;
mod datasets_form_partial;
mod datasets_http;
mod datasets_if_range;
mod datasets_in_progress;
mod datasets_names_http;
mod datasets_page_fingerprint;
mod datasets_page_resume;
mod datasets_refusals_http;
mod disk_http;
mod files_after_reboot;
mod files_spool_limit;
mod first_run;
mod http_admin;
mod http_auth;
mod http_machines;
mod lists;
mod local_node_restart;
mod machine_schedule_http;
mod machine_stop_http;
mod metrics_http;
mod nodes_simulated;
mod nojs_done;
mod notifications_http;
mod notifications_serve;
mod oidc_flow;
mod oidc_refusals;
mod origin_scheme;
mod page_cache;
mod pager_past_end;
mod routers_side_by_side;
mod security_errors;
mod security_headers;
mod security_redirects;
mod security_sessions;
mod security_signin;
mod session_end;
mod shutdown;
mod slow_clients;
mod snapshots_http;
mod ssh_gateway;
mod sso_ldap_http;
mod telemetry_pages;
mod terminal;
mod tokens_http;
mod two_servers;
mod users_list;
mod volume_pool_serve;
