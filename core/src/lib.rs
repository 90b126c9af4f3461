//! Gantry's domain rules, free of IO so they read like the specification and
//! can run both on the server and in the browser (form validation).

pub mod alloc;
pub mod compute;
pub mod datasets;
pub mod disk;
pub mod endpoint;
pub mod image_ref;
pub mod machine;
pub mod matching;
pub mod notify;
pub mod paging;
pub mod rebalance;
pub mod reclaim;
pub mod role;
pub mod schedule;
pub mod shuffle;
pub mod snapshot;
pub mod sso_mapping;
pub mod start_queue;
pub mod task;
pub mod telemetry;
pub mod throttle;
pub mod time;
pub mod token_scope;
pub mod url;
pub mod validate;
pub mod volume_pool;

pub use role::Role;
pub use validate::{Limits, ValidationError};

/// The group every account lands in unless an admin chooses another.
pub const DEFAULT_GROUP: &str = "default";
