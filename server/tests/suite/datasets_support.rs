//! The dataset tests' server: `gantry_testkit::datasets`' installation
//! (users in two groups with API tokens, dataset `coco` with version `v1`,
//! stores in a temporary directory or the ones a test passes) behind the
//! real router, and what those tests use with it, all from the testkit:
//! raw HTTP/1.1 for bodies that are huge or cut on purpose, the bytes they
//! send, the fault-injecting store [`Hooked`].

pub use gantry_testkit::{
    datasets::{
        limits, pattern, pattern_sha, sha, start, start_with, start_with_stores, until_no_uploads, Server, PASSWORD,
    },
    files_under,
    raw_http::{raw, raw_chunked},
    store::Hooked,
};
