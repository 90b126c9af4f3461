//! Regions (compute centres), the images each region can run, and the
//! platform's master image catalogue linked to them (PRODUCT B1–B3). Every
//! admin change is validated first, changes nothing when refused, and is
//! written to the audit log.

use crate::{audit, db::Pool, error::is_unique_violation, now, PlatformError};
use gantry_core::{
    matching::{Arch, ImageKind},
    validate,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct Region {
    pub id: i64,
    pub code: String,
    pub name: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct RegionImageRow {
    pub id: i64,
    pub region: String,
    pub reference: String,
    #[sqlx(try_from = "String")]
    pub arch: Arch,
    #[sqlx(try_from = "String")]
    pub kind: ImageKind,
}

impl RegionImageRow {
    /// "local · gantry/devbox:latest (amd64, training)".
    pub fn label(&self) -> String {
        format!("{} · {} ({}, {})", self.region, self.reference, self.arch, self.kind)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct MasterImageRow {
    pub id: i64,
    pub name: String,
    pub interpreter: String,
    pub interpreter_version: String,
    pub framework: String,
    pub framework_version: String,
    /// Ids of the linked region images, ascending (stored as the
    /// database's GROUP_CONCAT, "3,1").
    #[sqlx(try_from = "String")]
    pub links: LinkIds,
}

impl MasterImageRow {
    /// "PyTorch 2.4 · Python 3.11": how a person names its combination.
    pub fn combo_label(&self) -> String {
        combo_label(&self.framework, &self.framework_version, &self.interpreter, &self.interpreter_version)
    }
}

/// "PyTorch 2.4 · Python 3.11" (a master image's or a compute task's).
pub fn combo_label(framework: &str, framework_version: &str, interpreter: &str, interpreter_version: &str) -> String {
    format!("{framework} {framework_version} · {interpreter} {interpreter_version}")
}

/// Region image ids, ascending and each once; serialized as a JSON array.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LinkIds(pub Vec<i64>);

impl LinkIds {
    /// "3,1" (the database's GROUP_CONCAT) to `[1, 3]`; junk entries dropped.
    pub fn parse(list: &str) -> LinkIds {
        let mut ids: Vec<i64> = list.split(',').filter_map(|s| s.trim().parse().ok()).collect();
        ids.sort_unstable();
        ids.dedup();
        LinkIds(ids)
    }
}

impl std::ops::Deref for LinkIds {
    type Target = [i64];

    fn deref(&self) -> &[i64] {
        &self.0
    }
}

/// For `#[sqlx(try_from = "String")]` (through `TryFrom`'s blanket impl).
impl From<String> for LinkIds {
    fn from(list: String) -> Self {
        LinkIds::parse(&list)
    }
}

fn text(field: &str, value: &str, max: usize) -> Result<String, PlatformError> {
    let v = value.trim();
    if v.is_empty() || v.chars().count() > max || v.chars().any(char::is_control) {
        return Err(PlatformError::BadRequest(format!("{field} must be 1 to {max} printable characters")));
    }
    Ok(v.to_string())
}

fn conflict(e: sqlx::Error, what: String) -> PlatformError {
    if is_unique_violation(&e) {
        PlatformError::Conflict(what)
    } else {
        e.into()
    }
}

pub async fn create_region(
    pool: &Pool,
    actor: i64,
    code: &str,
    name: &str,
    description: &str,
) -> Result<Region, PlatformError> {
    validate::name("region code", code.trim())?;
    let name = text("region name", name, 64)?;
    let description =
        if description.trim().is_empty() { String::new() } else { text("description", description, 500)? };
    let mut tx = crate::transitions::begin(pool).await?;
    let region: Region = sqlx::query_as("INSERT INTO regions (code, name, description, created_at) VALUES (?, ?, ?, ?) RETURNING id, code, name, description")
        .bind(code.trim())
        .bind(&name)
        .bind(&description)
        .bind(now())
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| conflict(e, format!("a region with code {} exists already", code.trim())))?;
    audit::record(&mut *tx, Some(actor), "region.create", &format!("region {} ({name})", region.code)).await?;
    tx.commit().await?;
    Ok(region)
}

pub async fn list_regions(pool: &Pool) -> Result<Vec<Region>, PlatformError> {
    Ok(sqlx::query_as("SELECT id, code, name, description FROM regions ORDER BY code").fetch_all(pool).await?)
}

pub async fn create_region_image(
    pool: &Pool,
    actor: i64,
    region_code: &str,
    reference: &str,
    arch: &str,
    kind: &str,
) -> Result<RegionImageRow, PlatformError> {
    let reference = text("image address", reference, 200)?;
    // What a task's container is made from, as for a machine's image: an
    // engine never sees an option (`--…`) or a path in its place.
    crate::images::validate_reference(&reference)?;
    let arch: Arch =
        arch.trim().parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::BadRequest(e.to_string()))?;
    let kind: ImageKind = kind.trim().parse().map_err(|_| {
        let kinds: Vec<&str> = ImageKind::ALL.iter().map(|k| k.as_str()).collect();
        PlatformError::BadRequest(format!("image type must be one of: {}", kinds.join(", ")))
    })?;
    let mut tx = crate::transitions::begin(pool).await?;
    let region: i64 = sqlx::query_scalar("SELECT id FROM regions WHERE code = ?")
        .bind(region_code.trim())
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| PlatformError::BadRequest(format!("unknown region {:?}", region_code.trim())))?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO region_images (region_id, reference, arch, kind, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(region)
    .bind(&reference)
    .bind(arch.as_str())
    .bind(kind.as_str())
    .bind(now())
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| conflict(e, format!("region {} already has {reference} for {arch}", region_code.trim())))?;
    audit::record(
        &mut *tx,
        Some(actor),
        "region_image.create",
        &format!("region {}: {reference} ({arch}, {kind})", region_code.trim()),
    )
    .await?;
    tx.commit().await?;
    Ok(RegionImageRow { id, region: region_code.trim().to_string(), reference, arch, kind })
}

pub async fn list_region_images(pool: &Pool) -> Result<Vec<RegionImageRow>, PlatformError> {
    Ok(sqlx::query_as(
        "SELECT ri.id, r.code AS region, ri.reference, ri.arch, ri.kind FROM region_images ri JOIN regions r ON r.id = ri.region_id ORDER BY r.code, ri.id",
    )
    .fetch_all(pool)
    .await?)
}

pub struct NewMasterImage<'a> {
    pub name: &'a str,
    pub interpreter: &'a str,
    pub interpreter_version: &'a str,
    pub framework: &'a str,
    pub framework_version: &'a str,
}

pub async fn create_master_image(pool: &Pool, actor: i64, m: &NewMasterImage<'_>) -> Result<i64, PlatformError> {
    let name = text("name", m.name, 64)?;
    let fields = [
        text("interpreter", m.interpreter, 32)?,
        text("interpreter version", m.interpreter_version, 32)?,
        text("framework", m.framework, 32)?,
        text("framework version", m.framework_version, 32)?,
    ];
    let mut tx = crate::transitions::begin(pool).await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO master_images (name, interpreter, interpreter_version, framework, framework_version, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(&name)
    .bind(&fields[0])
    .bind(&fields[1])
    .bind(&fields[2])
    .bind(&fields[3])
    .bind(now())
    .fetch_one(&mut *tx)
    .await
    .map_err(|e| conflict(e, format!("a master image named {name} exists already")))?;
    let detail = format!("master image {name}: {} {} / {} {}", fields[2], fields[3], fields[0], fields[1]);
    audit::record(&mut *tx, Some(actor), "master_image.create", &detail).await?;
    tx.commit().await?;
    Ok(id)
}

pub async fn list_master_images(pool: &Pool) -> Result<Vec<MasterImageRow>, PlatformError> {
    Ok(sqlx::query_as(
        "SELECT m.id, m.name, m.interpreter, m.interpreter_version, m.framework, m.framework_version,
                COALESCE((SELECT GROUP_CONCAT(l.region_image_id) FROM master_image_links l WHERE l.master_image_id = m.id), '') AS links
         FROM master_images m ORDER BY m.name",
    )
    .fetch_all(pool)
    .await?)
}

/// Links (or, with `linked = false`, unlinks) a master image and a region image.
pub async fn set_link(
    pool: &Pool,
    actor: i64,
    master_image_id: i64,
    region_image_id: i64,
    linked: bool,
) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    let names: Option<(String, String)> = sqlx::query_as(
        "SELECT m.name, ri.reference FROM master_images m, region_images ri WHERE m.id = ? AND ri.id = ?",
    )
    .bind(master_image_id)
    .bind(region_image_id)
    .fetch_optional(&mut *tx)
    .await?;
    let (master, region_image) =
        names.ok_or_else(|| PlatformError::BadRequest("unknown master image or region image".into()))?;
    let sql = if linked {
        "INSERT INTO master_image_links (master_image_id, region_image_id) VALUES (?, ?)"
    } else {
        "DELETE FROM master_image_links WHERE master_image_id = ? AND region_image_id = ?"
    };
    let done = sqlx::query(sql)
        .bind(master_image_id)
        .bind(region_image_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| conflict(e, format!("{master} is already linked to {region_image}")))?;
    if !linked && done.rows_affected() == 0 {
        return Err(PlatformError::NotFound("link".into()));
    }
    let verb = if linked { "linked to" } else { "unlinked from" };
    audit::record(&mut *tx, Some(actor), "master_image.link", &format!("{master} {verb} {region_image}")).await?;
    tx.commit().await?;
    Ok(())
}

/// One GPU model's count in a region.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuCount {
    pub model: String,
    pub total: i64,
    pub free: i64,
}

/// A region's resources, derived from its nodes (lost nodes left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionResources {
    pub code: String,
    pub name: String,
    pub description: String,
    pub nodes: i64,
    pub ready_nodes: i64,
    /// Per GPU model, by model.
    pub gpus: Vec<GpuCount>,
    pub cpus: i64,
    pub memory_mb: i64,
}

pub async fn region_resources(pool: &Pool) -> Result<Vec<RegionResources>, PlatformError> {
    let regions = list_regions(pool).await?;
    let nodes: Vec<(String, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT r.code, COUNT(n.id), COALESCE(SUM(n.state = 'ready'), 0), COALESCE(SUM(n.cpu_count), 0), COALESCE(SUM(n.memory_mb), 0)
         FROM regions r LEFT JOIN nodes n ON n.region_id = r.id AND n.state <> 'lost' GROUP BY r.code",
    )
    .fetch_all(pool)
    .await?;
    // A held GPU its node no longer reports is neither there nor free; one
    // held back for the collector (a closed machine's container may still
    // run on it) is there but not free, as on the Nodes page.
    let gpus: Vec<(String, String, i64, i64)> = sqlx::query_as(
        "SELECT r.code, g.model, COUNT(*),
                SUM(mg.gpu_id IS NULL AND g.id NOT IN (SELECT gpu_id FROM gpus_left_to_collector))
         FROM gpus g JOIN nodes n ON n.id = g.node_id JOIN regions r ON r.id = n.region_id LEFT JOIN machine_gpus mg ON mg.gpu_id = g.id
         WHERE n.state <> 'lost' AND g.id NOT IN (SELECT gpu_id FROM gpus_gone) GROUP BY r.code, g.model ORDER BY g.model",
    )
    .fetch_all(pool)
    .await?;
    Ok(regions
        .into_iter()
        .map(|r| {
            let n = nodes.iter().find(|n| n.0 == r.code).cloned().unwrap_or_default();
            RegionResources {
                gpus: gpus
                    .iter()
                    .filter(|g| g.0 == r.code)
                    .map(|g| GpuCount { model: g.1.clone(), total: g.2, free: g.3 })
                    .collect(),
                nodes: n.1,
                ready_nodes: n.2,
                cpus: n.3,
                memory_mb: n.4,
                code: r.code,
                name: r.name,
                description: r.description,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master(links: Vec<i64>) -> MasterImageRow {
        MasterImageRow {
            id: 1,
            name: "torch".into(),
            interpreter: "Python".into(),
            interpreter_version: "3.11".into(),
            framework: "PyTorch".into(),
            framework_version: "2.4".into(),
            links: LinkIds(links),
        }
    }

    #[test]
    fn labels_read_as_people_say_them() {
        assert_eq!(master(vec![]).combo_label(), "PyTorch 2.4 · Python 3.11");
        let i = RegionImageRow {
            id: 3,
            region: "local".into(),
            reference: "gantry/devbox:latest".into(),
            arch: Arch::Amd64,
            kind: ImageKind::Training,
        };
        assert_eq!(i.label(), "local · gantry/devbox:latest (amd64, training)");
    }

    #[test]
    fn link_ids_parse() {
        assert_eq!(LinkIds::parse("3,1,3"), LinkIds(vec![1, 3]));
        assert_eq!(LinkIds::parse(""), LinkIds(Vec::new()));
        assert_eq!(LinkIds::parse("2, x,5"), LinkIds(vec![2, 5]));
        assert_eq!(serde_json::to_string(&master(vec![1, 3]).links).unwrap(), "[1,3]");
    }
}
