//! The admin console's server functions for regions, region images and the
//! master image catalogue (PRODUCT B1–B3). Every one starts with
//! `require_admin()`; the platform validates, audits, and changes nothing
//! on bad input (its error becomes 400/409 with the reason).

use crate::error::AppError;
use gantry_platform::catalogue::{MasterImageRow, RegionImageRow, RegionResources};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The catalogue page's data: master images and the region images they
/// can be linked to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalogue {
    pub masters: Vec<MasterImageRow>,
    pub region_images: Vec<RegionImageRow>,
}

/// Regions with the resources of their nodes (GPUs by model, CPUs, memory).
#[server(prefix = "/api", endpoint = "admin/regions")]
pub async fn list_regions() -> Result<Vec<RegionResources>, AppError> {
    crate::state::require_admin()?;
    Ok(gantry_platform::catalogue::region_resources(&crate::state::pool()?).await?)
}

/// Returns the new region's code.
#[server(prefix = "/api", endpoint = "admin/create_region")]
pub async fn create_region(code: String, name: String, description: Option<String>) -> Result<String, AppError> {
    let admin = crate::state::require_admin()?;
    let description = description.unwrap_or_default();
    let r =
        gantry_platform::catalogue::create_region(&crate::state::pool()?, admin.id, &code, &name, &description).await?;
    Ok(r.code)
}

#[server(prefix = "/api", endpoint = "admin/region_images")]
pub async fn list_region_images() -> Result<Vec<RegionImageRow>, AppError> {
    crate::state::require_admin()?;
    Ok(gantry_platform::catalogue::list_region_images(&crate::state::pool()?).await?)
}

#[server(prefix = "/api", endpoint = "admin/create_region_image")]
pub async fn create_region_image(
    region_code: String,
    reference: String,
    arch: String,
    kind: String,
) -> Result<RegionImageRow, AppError> {
    let admin = crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    Ok(gantry_platform::catalogue::create_region_image(&pool, admin.id, &region_code, &reference, &arch, &kind).await?)
}

/// Master images and every region image, for the catalogue page.
#[server(name = GetCatalogue, prefix = "/api", endpoint = "admin/catalogue")]
pub async fn catalogue() -> Result<Catalogue, AppError> {
    crate::state::require_admin()?;
    let pool = crate::state::pool()?;
    let masters = gantry_platform::catalogue::list_master_images(&pool).await?;
    let images = gantry_platform::catalogue::list_region_images(&pool).await?;
    Ok(Catalogue { masters, region_images: images })
}

/// Returns the new master image's id.
#[server(prefix = "/api", endpoint = "admin/create_master_image")]
pub async fn create_master_image(
    name: String,
    framework: String,
    framework_version: String,
    interpreter: String,
    interpreter_version: String,
) -> Result<i64, AppError> {
    use gantry_platform::catalogue::NewMasterImage;
    let admin = crate::state::require_admin()?;
    let new = NewMasterImage {
        name: &name,
        interpreter: &interpreter,
        interpreter_version: &interpreter_version,
        framework: &framework,
        framework_version: &framework_version,
    };
    Ok(gantry_platform::catalogue::create_master_image(&crate::state::pool()?, admin.id, &new).await?)
}

/// Links a region image (chosen in a select, so parsed here with a clear
/// message) to a master image. A duplicate link is a 409.
#[server(prefix = "/api", endpoint = "admin/link_image")]
pub async fn link_image(master_image_id: i64, region_image_id: String) -> Result<(), AppError> {
    let admin = crate::state::require_admin()?;
    let region_image_id = crate::model::catalogue::parse_choice("a region image", &region_image_id)
        .map_err(|m| AppError::Invalid(m).respond())?;
    gantry_platform::catalogue::set_link(&crate::state::pool()?, admin.id, master_image_id, region_image_id, true)
        .await?;
    Ok(())
}

#[server(prefix = "/api", endpoint = "admin/unlink_image")]
pub async fn unlink_image(master_image_id: i64, region_image_id: i64) -> Result<(), AppError> {
    let admin = crate::state::require_admin()?;
    gantry_platform::catalogue::set_link(&crate::state::pool()?, admin.id, master_image_id, region_image_id, false)
        .await?;
    Ok(())
}
