//! `gantry serve`'s dataset settings and the stores they make.

use clap::Args;
use gantry_platform::datasets::{
    store::{DirStore, S3Config, S3Store, Store},
    Datasets, Limits,
};
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
};

#[derive(Debug, Clone, Args)]
pub struct DatasetArgs {
    /// The platform's central dataset store as a directory (e.g. a JuiceFS
    /// mount); default `<data-dir>/datasets/central`. Ignored with --datasets-s3-endpoint.
    #[arg(long, env = "GANTRY_DATASETS_CENTRAL_DIR")]
    pub datasets_central_dir: Option<PathBuf>,
    /// Make the central store an S3-compatible bucket at this endpoint (e.g. the JuiceFS gateway, http://127.0.0.1:9100).
    #[arg(long, env = "GANTRY_DATASETS_S3_ENDPOINT")]
    pub datasets_s3_endpoint: Option<String>,
    #[arg(long, env = "GANTRY_DATASETS_S3_BUCKET", default_value = "gantry")]
    pub datasets_s3_bucket: String,
    #[arg(long, env = "GANTRY_DATASETS_S3_ACCESS_KEY", default_value = "", hide_env_values = true)]
    pub datasets_s3_access_key: String,
    #[arg(long, env = "GANTRY_DATASETS_S3_SECRET_KEY", default_value = "", hide_env_values = true)]
    pub datasets_s3_secret_key: String,
    #[arg(long, env = "GANTRY_DATASETS_S3_REGION", default_value = "us-east-1")]
    pub datasets_s3_region: String,
    /// Each region's store is `<this>/<region code>` unless set with --datasets-region-dir; default `<data-dir>/datasets/regions`.
    #[arg(long, env = "GANTRY_DATASETS_REGIONS_DIR")]
    pub datasets_regions_dir: Option<PathBuf>,
    /// A region's own store directory, `CODE=DIR` (repeat, or comma-separated in the variable).
    #[arg(long = "datasets-region-dir", env = "GANTRY_DATASETS_REGION_DIRS", value_delimiter = ',')]
    pub datasets_region_dirs: Vec<String>,
    /// Largest dataset file, in MiB.
    #[arg(long, env = "GANTRY_DATASET_UPLOAD_MAX_MB", default_value_t = 65536)]
    pub dataset_upload_max_mb: u64,
    /// Bytes (GiB) a group's datasets may hold unless an admin sets its own quota.
    #[arg(long, env = "GANTRY_DATASET_QUOTA_GB", default_value_t = 100)]
    pub dataset_quota_gb: u64,
}

impl DatasetArgs {
    pub fn build(&self, data_dir: &Path) -> Result<Datasets, String> {
        let central: Arc<dyn Store> = match &self.datasets_s3_endpoint {
            Some(endpoint) => Arc::new(
                S3Store::connect(&S3Config {
                    endpoint: endpoint.clone(),
                    bucket: self.datasets_s3_bucket.clone(),
                    access_key: self.datasets_s3_access_key.clone(),
                    secret_key: self.datasets_s3_secret_key.clone(),
                    region: self.datasets_s3_region.clone(),
                })
                .map_err(|e| format!("the central dataset store at {endpoint}: {e}"))?,
            ),
            None => Arc::new(DirStore::new(
                self.datasets_central_dir.clone().unwrap_or_else(|| data_dir.join("datasets/central")),
            )),
        };
        let mut regions: HashMap<String, Arc<dyn Store>> = HashMap::new();
        for item in &self.datasets_region_dirs {
            let (code, dir) =
                item.split_once('=').ok_or_else(|| format!("--datasets-region-dir wants CODE=DIR, not {item:?}"))?;
            regions.insert(code.trim().to_string(), Arc::new(DirStore::new(dir.trim())));
        }
        let root = self.datasets_regions_dir.clone().unwrap_or_else(|| data_dir.join("datasets/regions"));
        let limits = Limits {
            upload_max_bytes: self.dataset_upload_max_mb.saturating_mul(1 << 20),
            default_quota_bytes: self.dataset_quota_gb.saturating_mul(1 << 30),
            ..Limits::default()
        };
        Ok(Datasets::new(central, regions, Some(root), limits))
    }
}
