//! The routes that are not Leptos pages or server functions: the JSON API
//! (`api_v1`), datasets (`datasets`: browser forms, API, downloads),
//! a machine's files, logs and terminal (`files`, `logs`, `terminal`,
//! `workspace`: who may open them and when they end), and `/metrics`.

pub mod api_v1;
pub mod datasets;
pub mod files;
pub mod logs;
pub mod metrics;
pub mod terminal;
pub mod workspace;
