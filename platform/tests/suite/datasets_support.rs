//! The dataset tests' installation: `gantry_testkit::datasets::Coco` (two
//! groups, alice and carol, dataset `coco` with version `v1`) with stores in
//! directories or the ones a test passes, and the platform's limits; and
//! what those tests use with it, from the testkit: bodies, digests, the
//! fault-injecting store [`Hooked`].

use gantry_platform::datasets::{store::Store, Limits};
use gantry_testkit::datasets::{Coco, Options};
use std::sync::Arc;

pub use gantry_testkit::{
    datasets::{body, cut_body, random_bytes, sha},
    files_under,
    store::{Call, FailingWriter, Gate, Hooked},
};

/// The installation (see [`Coco`]).
pub type Env = Coco;

pub async fn env() -> Env {
    env_with(None, None).await
}

/// `central`/`region`: stores to use instead of directories in the temp dir.
pub async fn env_with(central: Option<Arc<dyn Store>>, region: Option<Arc<dyn Store>>) -> Env {
    let limits = Limits { upload_max_bytes: 4 << 30, default_quota_bytes: 8 << 30, resumable_expiry_secs: 3600 };
    Coco::new(Options { limits, central, region, tokens: false }).await
}
