//! The routes that are not Leptos pages or server functions: the JSON API
//! (`api_v1`; `api_login`: a password for a token, for `gantry login`), datasets (`datasets`: browser forms, API, downloads),
//! a machine's files, logs and terminal (`files`, `logs`, `terminal`,
//! `workspace`: who may open them and when they end), and `/metrics`.

pub mod api_login;
pub mod api_v1;
pub mod datasets;
pub mod files;
pub mod logs;
pub mod metrics;
pub mod oidc;
pub mod oidc_args;
pub mod terminal;
pub mod workspace;
