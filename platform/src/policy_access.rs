//! Which dev-machine images and which regions a group may use (PRODUCT
//! A.2), beside its GPU models (`policy`), with the same rule: no rows for
//! a group means "all". Admission reads `group_images` (a dev machine's
//! image) and `group_regions` (the nodes any machine of the group may go
//! to), the compute matcher reads `group_regions` (the regions it
//! considers), so an edit applies to the next request; machines already
//! placed keep their place.

use crate::{audit, db::Pool, PlatformError};
use sqlx::SqliteConnection;
use std::collections::{BTreeSet, HashMap};

/// Most images (regions) one group's allow-list may name.
pub const IMAGES_MAX: usize = 256;
pub const REGIONS_MAX: usize = 256;

/// A change to a group's image and region lists: `None` leaves a list as
/// it is, an empty list allows every image (region).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessChange {
    pub images: Option<Vec<i64>>,
    pub regions: Option<Vec<i64>>,
}

/// A group's lists as (id, name) — images by name, regions by code —
/// sorted by name; empty means all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupAccess {
    pub images: Vec<(i64, String)>,
    pub regions: Vec<(i64, String)>,
}

/// The two lists an access table holds, and how its entries are named.
#[derive(Clone, Copy)]
enum List {
    Images,
    Regions,
}

impl List {
    fn what(self) -> &'static str {
        match self {
            List::Images => "image",
            List::Regions => "region",
        }
    }

    fn max(self) -> usize {
        match self {
            List::Images => IMAGES_MAX,
            List::Regions => REGIONS_MAX,
        }
    }

    /// A group's entries as (id, name), sorted by name.
    fn current_sql(self) -> &'static str {
        match self {
            List::Images => "SELECT i.id, i.name FROM group_images g JOIN images i ON i.id = g.image_id WHERE g.group_id = ? ORDER BY i.name",
            List::Regions => "SELECT r.id, r.code FROM group_regions g JOIN regions r ON r.id = g.region_id WHERE g.group_id = ? ORDER BY r.code",
        }
    }

    /// Every (group, id, name), for the admin's table.
    fn all_sql(self) -> &'static str {
        match self {
            List::Images => "SELECT g.group_id, i.id, i.name FROM group_images g JOIN images i ON i.id = g.image_id ORDER BY g.group_id, i.name",
            List::Regions => "SELECT g.group_id, r.id, r.code FROM group_regions g JOIN regions r ON r.id = g.region_id ORDER BY g.group_id, r.code",
        }
    }

    /// The entry with this id that may be listed (images: not internal).
    fn lookup_sql(self) -> &'static str {
        match self {
            List::Images => "SELECT name FROM images WHERE id = ? AND internal = 0",
            List::Regions => "SELECT code FROM regions WHERE id = ?",
        }
    }

    fn delete_sql(self) -> &'static str {
        match self {
            List::Images => "DELETE FROM group_images WHERE group_id = ?",
            List::Regions => "DELETE FROM group_regions WHERE group_id = ?",
        }
    }

    fn insert_sql(self) -> &'static str {
        match self {
            List::Images => "INSERT INTO group_images (group_id, image_id) VALUES (?, ?)",
            List::Regions => "INSERT INTO group_regions (group_id, region_id) VALUES (?, ?)",
        }
    }
}

fn label(list: &[String]) -> String {
    if list.is_empty() {
        "all".to_string()
    } else {
        list.join(", ")
    }
}

async fn current(conn: &mut SqliteConnection, list: List, group_id: i64) -> Result<Vec<(i64, String)>, PlatformError> {
    Ok(sqlx::query_as(list.current_sql()).bind(group_id).fetch_all(&mut *conn).await?)
}

/// Replaces one list of group `group_id` after checking every id names an
/// entry that may be listed; returns the audit words ("images all → a, b").
/// The caller's transaction is left to roll back on an error.
async fn replace(conn: &mut SqliteConnection, list: List, group_id: i64, ids: &[i64]) -> Result<String, PlatformError> {
    let ids: BTreeSet<i64> = ids.iter().copied().collect();
    if ids.len() > list.max() {
        return Err(PlatformError::BadRequest(format!("a group may list at most {} {}s", list.max(), list.what())));
    }
    let mut new = Vec::with_capacity(ids.len());
    for id in &ids {
        let name: Option<String> = sqlx::query_scalar(list.lookup_sql()).bind(id).fetch_optional(&mut *conn).await?;
        let name = name.ok_or_else(|| {
            PlatformError::BadRequest(format!("there is no {} #{id} a group can be allowed", list.what()))
        })?;
        new.push(name);
    }
    new.sort();
    let old: Vec<String> = current(conn, list, group_id).await?.into_iter().map(|(_, n)| n).collect();
    sqlx::query(list.delete_sql()).bind(group_id).execute(&mut *conn).await?;
    for id in &ids {
        sqlx::query(list.insert_sql()).bind(group_id).bind(id).execute(&mut *conn).await?;
    }
    Ok(format!("{}s {} → {}", list.what(), label(&old), label(&new)))
}

/// Applies `change` to group `group_id` inside the caller's transaction
/// (which must hold the write lock); returns the audit words, empty when
/// nothing was asked. Unknown ids fail it with `BadRequest`.
pub(crate) async fn apply(
    conn: &mut SqliteConnection,
    group_id: i64,
    change: &AccessChange,
) -> Result<Vec<String>, PlatformError> {
    let mut words = Vec::new();
    if let Some(images) = &change.images {
        words.push(replace(conn, List::Images, group_id, images).await?);
    }
    if let Some(regions) = &change.regions {
        words.push(replace(conn, List::Regions, group_id, regions).await?);
    }
    Ok(words)
}

/// Sets a group's allowed images and/or regions alone, in one transaction
/// with an audit row naming old and new lists.
pub async fn set_group_access(
    pool: &Pool,
    actor: Option<i64>,
    group_id: i64,
    change: &AccessChange,
) -> Result<(), PlatformError> {
    let mut tx = crate::db::begin_immediate(pool).await?;
    let name: Option<String> =
        sqlx::query_scalar("SELECT name FROM groups WHERE id = ?").bind(group_id).fetch_optional(&mut *tx).await?;
    let name = name.ok_or_else(|| PlatformError::NotFound("group".into()))?;
    let words = apply(&mut tx, group_id, change).await?;
    if words.is_empty() {
        return Ok(());
    }
    audit::record(&mut *tx, actor, "group.access", &format!("group {name}: {}", words.join(", "))).await?;
    // A Groups page loaded before this must not post its old lists back.
    crate::policy::bump_rev(&mut tx, group_id).await?;
    tx.commit().await?;
    Ok(())
}

/// One group's lists; empty means all.
pub async fn group_access(pool: &Pool, group_id: i64) -> Result<GroupAccess, PlatformError> {
    let mut conn = pool.acquire().await?;
    Ok(GroupAccess {
        images: current(&mut conn, List::Images, group_id).await?,
        regions: current(&mut conn, List::Regions, group_id).await?,
    })
}

/// Every group's lists, keyed by group id (groups allowed everything absent).
pub async fn all_group_access(pool: &Pool) -> Result<HashMap<i64, GroupAccess>, PlatformError> {
    let mut map: HashMap<i64, GroupAccess> = HashMap::new();
    for list in [List::Images, List::Regions] {
        let rows: Vec<(i64, i64, String)> = sqlx::query_as(list.all_sql()).fetch_all(pool).await?;
        for (g, id, name) in rows {
            let entry = map.entry(g).or_default();
            match list {
                List::Images => entry.images.push((id, name)),
                List::Regions => entry.regions.push((id, name)),
            }
        }
    }
    Ok(map)
}

/// The regions group `group_id` may use, (id, code); empty means all.
pub(crate) async fn allowed_regions(
    conn: &mut SqliteConnection,
    group_id: i64,
) -> Result<Vec<(i64, String)>, PlatformError> {
    current(conn, List::Regions, group_id).await
}

/// The nodes of the regions group `group_id` may use; `None`: every region.
pub(crate) async fn allowed_nodes(
    conn: &mut SqliteConnection,
    group_id: i64,
) -> Result<Option<Vec<i64>>, PlatformError> {
    let ruled: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM group_regions WHERE group_id = ?)")
        .bind(group_id)
        .fetch_one(&mut *conn)
        .await?;
    if !ruled {
        return Ok(None);
    }
    let nodes = sqlx::query_scalar(
        "SELECT n.id FROM nodes n JOIN group_regions g ON g.region_id = n.region_id WHERE g.group_id = ? ORDER BY n.id",
    )
    .bind(group_id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Some(nodes))
}

/// The group's allowed regions as words: "it may use only a, b".
pub(crate) fn may_use(allowed: &[(i64, String)]) -> String {
    format!("it may use only {}", allowed.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>().join(", "))
}

/// Why group `group_name` may use none of `regions` (ids), naming them and
/// the regions it may use; `None` when it may use one of them, or every
/// region.
pub(crate) async fn refusal_for_regions(
    conn: &mut SqliteConnection,
    group_id: i64,
    group_name: &str,
    regions: &[i64],
) -> Result<Option<String>, PlatformError> {
    let allowed = allowed_regions(conn, group_id).await?;
    if allowed.is_empty() || regions.iter().any(|r| allowed.iter().any(|(id, _)| id == r)) {
        return Ok(None);
    }
    let mut codes = BTreeSet::new();
    for r in regions {
        let code: Option<String> =
            sqlx::query_scalar("SELECT code FROM regions WHERE id = ?").bind(r).fetch_optional(&mut *conn).await?;
        codes.insert(code.unwrap_or_else(|| format!("#{r}")));
    }
    let codes: Vec<String> = codes.into_iter().collect();
    let plural = if codes.len() == 1 { "region" } else { "regions" };
    Ok(Some(format!("group {group_name} may not use {plural} {} ({})", codes.join(", "), may_use(&allowed))))
}

/// The same for the regions of `nodes` (where a machine could go).
pub(crate) async fn refusal_for_nodes(
    conn: &mut SqliteConnection,
    group_id: i64,
    group_name: &str,
    nodes: &[i64],
) -> Result<Option<String>, PlatformError> {
    let mut regions = BTreeSet::new();
    for n in nodes {
        let r: Option<i64> =
            sqlx::query_scalar("SELECT region_id FROM nodes WHERE id = ?").bind(n).fetch_optional(&mut *conn).await?;
        regions.extend(r);
    }
    let regions: Vec<i64> = regions.into_iter().collect();
    refusal_for_regions(conn, group_id, group_name, &regions).await
}

/// "(group ml may use only region east)" for a refusal among the nodes
/// left after the region rule; empty when the group has no rule.
pub(crate) async fn region_note(
    conn: &mut SqliteConnection,
    group_id: i64,
    group_name: &str,
) -> Result<String, PlatformError> {
    let allowed = allowed_regions(conn, group_id).await?;
    if allowed.is_empty() {
        return Ok(String::new());
    }
    Ok(format!(" (group {group_name}: {})", may_use(&allowed)))
}

/// Every requester's allowed region codes through their group, for the
/// matcher (users of groups allowed every region absent).
pub(crate) async fn region_codes_by_user(pool: &Pool) -> Result<HashMap<i64, BTreeSet<String>>, PlatformError> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT u.id, r.code FROM users u JOIN group_regions g ON g.group_id = u.group_id JOIN regions r ON r.id = g.region_id",
    )
    .fetch_all(pool)
    .await?;
    let mut map: HashMap<i64, BTreeSet<String>> = HashMap::new();
    for (user, code) in rows {
        map.entry(user).or_default().insert(code);
    }
    Ok(map)
}
