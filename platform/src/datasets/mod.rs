//! Datasets (PRODUCT C): definitions shared by the platform and every
//! region, versions, and files stored twice — in the platform's central
//! store and in the owning region's store — through a streamed,
//! checksummed, all-or-nothing upload.
//!
//! Who sees what: a group-private dataset exists only for its group (and
//! admins): everyone else gets "not found". Public datasets are seen and
//! downloaded by every group; only the owning group (and admins) write.

pub mod access;
mod begin;
mod catalog;
mod cleanup;
mod error;
mod failure;
mod in_progress;
mod listing;
pub mod mounts;
mod pipeline;
mod placing;
mod purge;
pub mod quotas;
pub mod reading;
pub mod store;
mod sweep;
mod upload;
pub mod writing;

pub use begin::{begin_upload, begin_upload_of_file, resume_upload, BeginUpload};
pub use catalog::*;
pub use cleanup::{clean_after_start, clean_at_start};
pub use error::DatasetError;
pub use in_progress::{uploads_in_progress, UploadInProgress};
pub use reading::{listed_file, Listed};
pub use sweep::{sweep, Swept, SWEEP_EVERY};
pub use upload::{abandon_upload, cancel_upload, upload_status, write_upload, write_upload_as, Upload, UploadState};

use std::{collections::HashMap, path::PathBuf, sync::Arc};
use store::{DirStore, Store};

/// Server-wide dataset settings.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest single file.
    pub upload_max_bytes: u64,
    /// Bytes a group's datasets may hold unless an admin set its own figure.
    pub default_quota_bytes: u64,
    /// Resumable uploads untouched for this long are removed (by the
    /// periodic [`sweep()`] and at start).
    pub resumable_expiry_secs: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { upload_max_bytes: 64 << 30, default_quota_bytes: 100 << 30, resumable_expiry_secs: 7 * 24 * 3600 }
    }
}

/// The stores and limits every dataset request uses; cheap to clone.
#[derive(Clone)]
pub struct Datasets(Option<Arc<Inner>>);

struct Inner {
    central: Arc<dyn Store>,
    /// Regions with a store of their own.
    regions: HashMap<String, Arc<dyn Store>>,
    /// Other regions get `{region_root}/{code}`; without it they have no store.
    region_root: Option<PathBuf>,
    limits: Limits,
}

impl Datasets {
    pub fn new(
        central: Arc<dyn Store>,
        regions: HashMap<String, Arc<dyn Store>>,
        region_root: Option<PathBuf>,
        limits: Limits,
    ) -> Self {
        Datasets(Some(Arc::new(Inner { central, regions, region_root, limits })))
    }

    /// A server without dataset stores: every dataset request answers 503.
    pub fn unconfigured() -> Self {
        Datasets(None)
    }

    fn inner(&self) -> Result<&Inner, DatasetError> {
        self.0.as_deref().ok_or(DatasetError::Unconfigured)
    }

    pub fn is_configured(&self) -> bool {
        self.0.is_some()
    }

    pub fn limits(&self) -> Limits {
        self.0.as_ref().map(|i| i.limits).unwrap_or_default()
    }

    pub fn central(&self) -> Result<Arc<dyn Store>, DatasetError> {
        Ok(self.inner()?.central.clone())
    }

    /// The store of a region; regions without one are refused, saying so.
    pub fn region_store(&self, region: &str) -> Result<Arc<dyn Store>, DatasetError> {
        let inner = self.inner()?;
        if let Some(store) = inner.regions.get(region) {
            return Ok(store.clone());
        }
        match &inner.region_root {
            Some(root) => Ok(Arc::new(DirStore::new(root.join(region)))),
            None => Err(DatasetError::Store(format!("region {region} has no dataset store configured"))),
        }
    }

    /// Every store files may be in: the central one and each region's.
    pub fn describe(&self) -> Vec<(String, String)> {
        let Some(inner) = self.0.as_deref() else { return Vec::new() };
        let mut out = vec![("central".to_string(), inner.central.describe())];
        for (code, store) in &inner.regions {
            out.push((format!("region {code}"), store.describe()));
        }
        if let Some(root) = &inner.region_root {
            out.push(("other regions".to_string(), format!("directory {}/<region>", root.display())));
        }
        out
    }
}
