//! Dataset definitions and versions for the pages. Files themselves move
//! through the streamed routes in `server/src/datasets/`, never through a
//! server function's arguments.

use crate::error::AppError;
use gantry_platform::datasets::{self as ds, DatasetView, FileView, UploadInProgress, VersionView};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The list page: the datasets and what the filters can choose from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatasetList {
    pub datasets: Vec<DatasetView>,
    /// (code, name) of every region.
    pub regions: Vec<(String, String)>,
}

/// A dataset's page: it, its versions, and whether the viewer may change it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatasetDetail {
    pub dataset: DatasetView,
    pub versions: Vec<VersionView>,
    /// The viewer's group owns it (or the viewer is an admin).
    pub may_write: bool,
}

/// A version's page: its dataset, its files and, for its writers, the
/// upload area's limit and the uploads in progress.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VersionDetail {
    pub dataset: DatasetView,
    pub version: VersionView,
    pub files: Vec<FileView>,
    pub may_write: bool,
    pub upload_max_bytes: u64,
    /// Its uploads in progress (for its writers only; empty otherwise).
    pub uploads: Vec<UploadInProgress>,
}

#[server(prefix = "/api", endpoint = "load_datasets")]
pub async fn load_datasets(q: String, region: String, category: String) -> Result<DatasetList, AppError> {
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    let filter = ds::Filter {
        q: Some(q),
        region: Some(region).filter(|r| !r.is_empty()),
        category: Some(category).filter(|c| !c.is_empty()),
    };
    let datasets = ds::list_datasets(&pool, &user, &filter).await.map_err(app_error)?;
    let regions =
        gantry_platform::catalogue::list_regions(&pool).await?.into_iter().map(|r| (r.code, r.name)).collect();
    Ok(DatasetList { datasets, regions })
}

#[server(prefix = "/api", endpoint = "create_dataset")]
pub async fn create_dataset(
    code: String,
    name: String,
    region: String,
    category: String,
    description: String,
    visibility: String,
) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let new = ds::NewDataset {
        code: &code,
        name: &name,
        region: &region,
        category: &category,
        description: &description,
        visibility: &visibility,
    };
    let d = ds::create_dataset(&crate::state::pool()?, &user, &new).await.map_err(app_error)?;
    if crate::api::compute::form_post() {
        leptos_axum::redirect(&format!("/datasets/{}", d.code));
    }
    Ok(d.code)
}

#[server(prefix = "/api", endpoint = "load_dataset")]
pub async fn load_dataset(code: String) -> Result<DatasetDetail, AppError> {
    let user = crate::state::auth()?;
    let (dataset, versions) = ds::versions(&crate::state::pool()?, &user, &code).await.map_err(app_error)?;
    let may_write = ds::may_write(&user, &dataset).is_ok();
    Ok(DatasetDetail { dataset, versions, may_write })
}

#[server(prefix = "/api", endpoint = "create_dataset_version")]
pub async fn create_dataset_version(code: String, name: String) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let v = ds::create_version(&crate::state::pool()?, &user, &code, &name).await.map_err(app_error)?;
    if crate::api::compute::form_post() {
        leptos_axum::redirect(&crate::model::datasets::version_url(&code, &v.name));
    }
    Ok(v.name)
}

#[server(prefix = "/api", endpoint = "seal_dataset_version")]
pub async fn seal_dataset_version(code: String, version: String) -> Result<(), AppError> {
    let user = crate::state::auth()?;
    ds::seal_version(&crate::state::pool()?, &user, &code, &version).await.map_err(app_error)
}

/// Deletes the version and its files in both stores.
#[server(prefix = "/api", endpoint = "delete_dataset_version")]
pub async fn delete_dataset_version(code: String, version: String) -> Result<(), AppError> {
    let user = crate::state::auth()?;
    let stores = stores()?;
    ds::delete_version(&crate::state::pool()?, &stores, &user, &code, &version).await.map_err(app_error)?;
    if crate::api::compute::form_post() {
        leptos_axum::redirect(&format!("/datasets/{}", crate::model::datasets::encode(&code)));
    }
    Ok(())
}

#[server(prefix = "/api", endpoint = "load_dataset_version")]
pub async fn load_dataset_version(code: String, version: String) -> Result<VersionDetail, AppError> {
    let user = crate::state::auth()?;
    let (dataset, v, files) = ds::files(&crate::state::pool()?, &user, &code, &version).await.map_err(app_error)?;
    let may_write = ds::may_write(&user, &dataset).is_ok();
    let stores = stores().unwrap_or_else(|_| ds::Datasets::unconfigured());
    let upload_max_bytes = if stores.is_configured() { stores.limits().upload_max_bytes } else { 0 };
    // Readers of a public dataset see its files, never its uploads.
    let uploads = if may_write {
        ds::uploads_in_progress(&crate::state::pool()?, &stores, &user, &code, &version).await.map_err(app_error)?
    } else {
        Vec::new()
    };
    Ok(VersionDetail { dataset, version: v, files, may_write, upload_max_bytes, uploads })
}

/// Cancels an upload in progress from the version page (the same rules as
/// `DELETE …/uploads/{name}`: the owning group's members and admins); one
/// a request is still writing is refused until that request ends.
#[server(prefix = "/api", endpoint = "cancel_dataset_upload")]
pub async fn cancel_dataset_upload(code: String, version: String, name: String) -> Result<(), AppError> {
    use ds::{cancel_upload, DatasetError};
    let user = crate::state::auth()?;
    let stores = stores()?;
    cancel_upload(&crate::state::pool()?, &stores, &user, &code, &version, &name).await.map_err(|e| match e {
        DatasetError::Busy(_) => app_error(DatasetError::Busy(format!(
            "{name} is still receiving; try again in a few seconds (a request that was cut off lets go within {} s)",
            ds::writing::LEASE_SECS
        ))),
        other => app_error(other),
    })
}

/// Resolves a form's "datasets" field (`code/version` items) for the
/// signed-in user: visible, sealed, mountable — or a refusal saying which.
pub(crate) async fn mounts_for(
    user: &gantry_platform::accounts::User,
    field: Option<&str>,
) -> Result<Vec<ds::mounts::DatasetMount>, AppError> {
    let stores = stores().ok();
    ds::mounts::resolve_named(&crate::state::pool()?, stores.as_ref(), user, field.unwrap_or(""))
        .await
        .map_err(app_error)
}

pub(crate) fn app_error(e: ds::DatasetError) -> AppError {
    let message = e.public_message();
    match e.status() {
        400 | 413 | 422 => AppError::Invalid(message),
        403 => AppError::Refused(message),
        404 => AppError::NotFound(message),
        409 => AppError::Conflict(message),
        _ => AppError::Internal(message),
    }
    .respond()
}

/// The stores `gantry serve` put in the request's extensions.
pub(crate) fn stores() -> Result<ds::Datasets, AppError> {
    use_context::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<ds::Datasets>().cloned())
        .ok_or_else(|| AppError::Internal(ds::DatasetError::Unconfigured.to_string()))
}
