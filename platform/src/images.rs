//! The catalogue of dev-machine images that admins manage.

use crate::{audit, db::Pool, error::is_unique_violation, now, PlatformError};
use gantry_core::validate;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct Image {
    pub id: i64,
    pub name: String,
    pub reference: String,
    pub description: String,
    pub is_default: bool,
}

/// A Docker image reference as the engine's grammar has it
/// (`gantry_core::image_ref`): registry/name:tag or @digest — which also
/// keeps out spaces and shell characters.
pub fn validate_reference(reference: &str) -> Result<(), PlatformError> {
    gantry_core::image_ref::check(reference).map_err(|why| {
        PlatformError::BadRequest(format!(
            "\"{}\" is not an image reference: {why} (expected e.g. registry.example:5000/team/torch:2.4)",
            reference.chars().take(60).collect::<String>()
        ))
    })
}

pub async fn create_image(
    pool: &Pool,
    actor: Option<i64>,
    name: &str,
    reference: &str,
    description: &str,
    make_default: bool,
) -> Result<Image, PlatformError> {
    validate::name("image name", name)?;
    validate_reference(reference)?;
    if description.chars().count() > 500 {
        return Err(gantry_core::ValidationError::TooLong { field: "description", max: 500 }.into());
    }
    // Shown to every user in the create form's image list: one line of
    // printable text, as every other admin text field.
    if description.chars().any(char::is_control) {
        return Err(PlatformError::BadRequest("image description must be printable characters on one line".into()));
    }
    let mut tx = crate::transitions::begin(pool).await?;
    if make_default {
        sqlx::query("UPDATE images SET is_default = 0").execute(&mut *tx).await?;
    }
    let id =
        sqlx::query("INSERT INTO images (name, reference, description, is_default, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(name)
            .bind(reference)
            .bind(description)
            .bind(make_default)
            .bind(now())
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    PlatformError::Conflict(format!("an image named \"{name}\" already exists"))
                } else {
                    e.into()
                }
            })?
            .last_insert_rowid();
    audit::record(&mut *tx, actor, "image.create", &format!("image {name} = {reference}")).await?;
    tx.commit().await?;
    image_by_id(pool, id).await
}

/// Registers `reference` as the default image named `name` unless an image
/// with that name exists already (first start, demo image).
pub async fn ensure_default_image(
    pool: &Pool,
    name: &str,
    reference: &str,
    description: &str,
) -> Result<(), PlatformError> {
    let exists: Option<(i64,)> =
        sqlx::query_as("SELECT id FROM images WHERE name = ?").bind(name).fetch_optional(pool).await?;
    if exists.is_none() {
        let has_default: Option<(i64,)> =
            sqlx::query_as("SELECT id FROM images WHERE is_default = 1").fetch_optional(pool).await?;
        create_image(pool, None, name, reference, description, has_default.is_none()).await?;
    }
    Ok(())
}

pub async fn image_by_id(pool: &Pool, id: i64) -> Result<Image, PlatformError> {
    sqlx::query_as("SELECT id, name, reference, description, is_default FROM images WHERE id = ?")
        .bind(id)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| PlatformError::NotFound("image".into()))
}

pub async fn list_images(pool: &Pool) -> Result<Vec<Image>, PlatformError> {
    Ok(sqlx::query_as("SELECT id, name, reference, description, is_default FROM images WHERE internal = 0 ORDER BY is_default DESC, name")
        .fetch_all(pool)
        .await?)
}

/// Images a group may use: its allow-list, or all when it has none.
pub async fn images_for_group(pool: &Pool, group_id: i64) -> Result<Vec<Image>, PlatformError> {
    Ok(sqlx::query_as(
        "SELECT i.id, i.name, i.reference, i.description, i.is_default FROM images i
         WHERE i.internal = 0 AND (NOT EXISTS (SELECT 1 FROM group_images WHERE group_id = ?1)
            OR i.id IN (SELECT image_id FROM group_images WHERE group_id = ?1))
         ORDER BY i.is_default DESC, i.name",
    )
    .bind(group_id)
    .fetch_all(pool)
    .await?)
}

/// The internal image row a compute task's machine points to for a region
/// image's reference (made on first use; never offered for dev machines).
pub async fn internal_image_for(conn: &mut sqlx::SqliteConnection, reference: &str) -> Result<i64, PlatformError> {
    let name = format!("job:{reference}");
    sqlx::query("INSERT INTO images (name, reference, description, is_default, internal, created_at) VALUES (?, ?, 'compute task image', 0, 1, ?) ON CONFLICT(name) DO NOTHING")
        .bind(&name)
        .bind(reference)
        .bind(crate::now())
        .execute(&mut *conn)
        .await?;
    Ok(sqlx::query_scalar("SELECT id FROM images WHERE name = ?").bind(&name).fetch_one(&mut *conn).await?)
}
