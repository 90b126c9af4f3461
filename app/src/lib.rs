//! Gantry's user interface: the self-service portal, the admin console and
//! the dataset pages, rendered on the server only (`public/live.js` makes
//! them live). The one part that runs in the browser is the dataset upload
//! area, a Leptos island (`island/`): it and the pure helpers of `model` are
//! all the wasm build compiles. Everything else is the server's: pages render
//! the platform's views directly; server functions live in `api/`, one file
//! per area.

// Leptos' view types nest as deep as the page: the release wasm build of the
// dataset version page needs more than the default 128 query levels.
#![recursion_limit = "256"]

#[cfg(feature = "ssr")]
pub mod api;
#[cfg(feature = "ssr")]
pub mod components;
#[cfg(feature = "ssr")]
pub mod error;
pub mod island;
pub mod model;
#[cfg(feature = "ssr")]
pub mod pages;
#[cfg(feature = "ssr")]
mod shell;
#[cfg(feature = "ssr")]
pub mod state;

#[cfg(feature = "ssr")]
pub use shell::{shell, signed_in, App};
