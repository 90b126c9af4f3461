//! Dataset definitions and versions for the pages. Files themselves move
//! through the streamed routes in `server/src/datasets/`, never through a
//! server function's arguments.

use crate::{
    error::AppError,
    model::datasets::{DatasetDetail, DatasetList, VersionDetail},
};
use leptos::prelude::*;

#[server(prefix = "/api", endpoint = "load_datasets")]
pub async fn load_datasets(q: String, region: String, category: String) -> Result<DatasetList, AppError> {
    let user = crate::state::auth()?;
    let pool = crate::state::pool()?;
    let filter = gantry_platform::datasets::Filter {
        q: Some(q),
        region: Some(region).filter(|r| !r.is_empty()),
        category: Some(category).filter(|c| !c.is_empty()),
    };
    let list = gantry_platform::datasets::list_datasets(&pool, &user, &filter).await.map_err(app_error)?;
    let regions =
        gantry_platform::catalogue::list_regions(&pool).await?.into_iter().map(|r| (r.code, r.name)).collect();
    Ok(DatasetList { datasets: list.into_iter().map(ssr::row).collect(), regions })
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
    let new = gantry_platform::datasets::NewDataset {
        code: &code,
        name: &name,
        region: &region,
        category: &category,
        description: &description,
        visibility: &visibility,
    };
    let d = gantry_platform::datasets::create_dataset(&crate::state::pool()?, &user, &new).await.map_err(app_error)?;
    if crate::api::compute::form_post() {
        leptos_axum::redirect(&format!("/datasets/{}", d.code));
    }
    Ok(d.code)
}

#[server(prefix = "/api", endpoint = "load_dataset")]
pub async fn load_dataset(code: String) -> Result<DatasetDetail, AppError> {
    let user = crate::state::auth()?;
    let (d, versions) =
        gantry_platform::datasets::versions(&crate::state::pool()?, &user, &code).await.map_err(app_error)?;
    let may_write = gantry_platform::datasets::may_write(&user, &d).is_ok();
    Ok(DatasetDetail { dataset: ssr::row(d), versions: versions.into_iter().map(ssr::version).collect(), may_write })
}

#[server(prefix = "/api", endpoint = "create_dataset_version")]
pub async fn create_dataset_version(code: String, name: String) -> Result<String, AppError> {
    let user = crate::state::auth()?;
    let v = gantry_platform::datasets::create_version(&crate::state::pool()?, &user, &code, &name)
        .await
        .map_err(app_error)?;
    if crate::api::compute::form_post() {
        leptos_axum::redirect(&crate::model::datasets::version_url(&code, &v.name));
    }
    Ok(v.name)
}

#[server(prefix = "/api", endpoint = "seal_dataset_version")]
pub async fn seal_dataset_version(code: String, version: String) -> Result<(), AppError> {
    let user = crate::state::auth()?;
    gantry_platform::datasets::seal_version(&crate::state::pool()?, &user, &code, &version).await.map_err(app_error)
}

/// Deletes the version and its files in both stores.
#[server(prefix = "/api", endpoint = "delete_dataset_version")]
pub async fn delete_dataset_version(code: String, version: String) -> Result<(), AppError> {
    let user = crate::state::auth()?;
    let stores = ssr::stores()?;
    gantry_platform::datasets::delete_version(&crate::state::pool()?, &stores, &user, &code, &version)
        .await
        .map_err(app_error)?;
    if crate::api::compute::form_post() {
        leptos_axum::redirect(&format!("/datasets/{}", crate::model::datasets::encode(&code)));
    }
    Ok(())
}

#[server(prefix = "/api", endpoint = "load_dataset_version")]
pub async fn load_dataset_version(code: String, version: String) -> Result<VersionDetail, AppError> {
    let user = crate::state::auth()?;
    let (d, v, files) =
        gantry_platform::datasets::files(&crate::state::pool()?, &user, &code, &version).await.map_err(app_error)?;
    let may_write = gantry_platform::datasets::may_write(&user, &d).is_ok();
    let stores = ssr::stores().unwrap_or_else(|_| gantry_platform::datasets::Datasets::unconfigured());
    let upload_max_bytes = if stores.is_configured() { stores.limits().upload_max_bytes } else { 0 };
    // Readers of a public dataset see its files, never its uploads.
    let uploads = if may_write {
        gantry_platform::datasets::uploads_in_progress(&crate::state::pool()?, &stores, &user, &code, &version)
            .await
            .map_err(app_error)?
    } else {
        Vec::new()
    };
    Ok(VersionDetail {
        dataset: ssr::row(d),
        version: ssr::version(v),
        files: files.into_iter().map(ssr::file).collect(),
        may_write,
        upload_max_bytes,
        uploads: uploads.into_iter().map(ssr::upload).collect(),
    })
}

/// Cancels an upload in progress from the version page (the same rules as
/// `DELETE …/uploads/{name}`: the owning group's members and admins); one
/// a request is still writing is refused until that request ends.
#[server(prefix = "/api", endpoint = "cancel_dataset_upload")]
pub async fn cancel_dataset_upload(code: String, version: String, name: String) -> Result<(), AppError> {
    use gantry_platform::datasets::{cancel_upload, DatasetError};
    let user = crate::state::auth()?;
    let stores = ssr::stores()?;
    cancel_upload(&crate::state::pool()?, &stores, &user, &code, &version, &name).await.map_err(|e| match e {
        DatasetError::Busy(_) => app_error(DatasetError::Busy(format!(
            "{name} is still receiving; try again in a few seconds (a request that was cut off lets go within {} s)",
            gantry_platform::datasets::writing::LEASE_SECS
        ))),
        other => app_error(other),
    })
}

/// Resolves a form's "datasets" field (`code/version` items) for the
/// signed-in user: visible, sealed, mountable — or a refusal saying which.
#[cfg(feature = "ssr")]
pub(crate) async fn mounts_for(
    user: &gantry_platform::accounts::User,
    field: Option<&str>,
) -> Result<Vec<gantry_platform::datasets::mounts::DatasetMount>, AppError> {
    let stores = ssr::stores().ok();
    gantry_platform::datasets::mounts::resolve_named(&crate::state::pool()?, stores.as_ref(), user, field.unwrap_or(""))
        .await
        .map_err(app_error)
}

#[cfg(feature = "ssr")]
pub(crate) fn app_error(e: gantry_platform::datasets::DatasetError) -> AppError {
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

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use crate::{error::AppError, model::datasets::*};
    use gantry_platform::datasets as ds;

    /// The stores `gantry serve` put in the request's extensions.
    pub fn stores() -> Result<ds::Datasets, AppError> {
        leptos::prelude::use_context::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<ds::Datasets>().cloned())
            .ok_or_else(|| AppError::Internal(ds::DatasetError::Unconfigured.to_string()))
    }

    pub fn row(d: ds::DatasetView) -> DatasetRow {
        DatasetRow {
            code: d.code,
            name: d.name,
            region: d.region,
            region_name: d.region_name,
            category: d.category,
            description: d.description,
            visibility: d.visibility,
            group: d.group_name,
            created_by: d.created_by,
            created_at: d.created_at,
            versions: d.versions,
            bytes: d.bytes,
        }
    }

    pub fn version(v: ds::VersionView) -> VersionRow {
        VersionRow {
            name: v.name,
            sealed_at: v.sealed_at,
            created_by: v.created_by,
            created_at: v.created_at,
            files: v.files,
            bytes: v.bytes,
        }
    }

    pub fn file(f: ds::FileView) -> FileRow {
        FileRow { name: f.name, size: f.size, sha256: f.sha256, uploaded_by: f.uploaded_by, uploaded_at: f.uploaded_at }
    }

    pub fn upload(u: ds::UploadInProgress) -> UploadInProgressRow {
        UploadInProgressRow {
            name: u.name,
            held: u.held,
            total: u.total,
            started_by: u.started_by,
            started_at: u.started_at,
            touched_at: u.touched_at,
            receiving: u.receiving,
            resumable: u.resumable,
        }
    }
}
