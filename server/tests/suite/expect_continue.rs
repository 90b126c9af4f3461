//! Raw HTTP/1.1 requests that say `Expect: 100-continue` are
//! `gantry_testkit::raw_http`'s (`open`, `body_wanted`, `reply`); this
//! module names the two that `datasets_access_ends` takes from here.

pub use gantry_testkit::raw_http::{body_wanted, reply};
