//! Sealed versions mounted read-only into machines (PRODUCT C: "a sealed
//! version is mounted by compute tasks and dev machines read-only").
//!
//! A request names versions as `code/version`; they are resolved once, when
//! the request is accepted: the version must be visible to the requester's
//! group (another group's private dataset is "not found", as everywhere) and
//! sealed, and its files must sit in a directory the node's engine can
//! bind-mount — the owning region's store, or else the central store when
//! that is a directory (the JuiceFS mount). The directory is recorded with
//! the machine, so restarts, reinstalls, restores and moves mount the same
//! files. Nodes reach those directories at the same path (a local engine
//! does; remote nodes share the region's store, e.g. a JuiceFS mount).

use super::{catalog, DatasetError, Datasets};
use crate::{accounts::User, db::Pool, executor::ReadOnlyMount};
use gantry_core::datasets::MountRef;
use serde::{Deserialize, Serialize};
use sqlx::SqliteConnection;

/// One resolved mount, as stored with a machine or a queued compute task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetMount {
    pub version_id: i64,
    /// `code/version`, for pages and messages.
    pub name: String,
    pub host_dir: String,
    pub target: String,
}

impl DatasetMount {
    pub fn read_only(&self) -> ReadOnlyMount {
        ReadOnlyMount { source: self.host_dir.clone(), target: self.target.clone() }
    }
}

/// Checks and resolves every requested version; nothing is written.
pub async fn resolve(
    pool: &Pool,
    stores: &Datasets,
    user: &User,
    refs: &[MountRef],
) -> Result<Vec<DatasetMount>, DatasetError> {
    let mut out = Vec::with_capacity(refs.len());
    for r in refs {
        let (d, v) = catalog::version(pool, user, &r.code, &r.version).await?;
        if v.sealed_at.is_none() {
            return Err(DatasetError::Conflict(format!(
                "version {} of dataset {} is not sealed; only sealed (read-only) versions can be mounted",
                r.version, r.code
            )));
        }
        let region = stores.region_store(&d.region)?;
        let central = stores.central()?;
        let root = region.local_dir().or(central.local_dir()).ok_or_else(|| {
            DatasetError::store(
                format!("dataset {} cannot be mounted: neither the store of region {} nor the central store is a directory a node can mount", r.code, d.region),
                format!("region {}: {}; central: {}", d.region, region.describe(), central.describe()),
            )
        })?;
        let dir = root.join(&r.code).join(&r.version);
        // A sealed version without files has no directory yet; the engine
        // refuses to bind a missing path.
        let created = tokio::fs::create_dir_all(&dir).await.and(tokio::fs::canonicalize(&dir).await);
        let host_dir = created.map_err(|e| {
            DatasetError::store(
                format!("the files of {r} cannot be mounted: their directory could not be made"),
                format!("{}: {e}", dir.display()),
            )
        })?;
        out.push(DatasetMount {
            version_id: v.id,
            name: r.to_string(),
            host_dir: host_dir.display().to_string(),
            target: r.target(),
        });
    }
    Ok(out)
}

/// The first of `mounts` whose version no longer exists (deleted between
/// the request's check and its admission), read inside the admission
/// transaction so the answer holds until it commits.
pub async fn first_missing(
    conn: &mut SqliteConnection,
    mounts: &[DatasetMount],
) -> Result<Option<String>, sqlx::Error> {
    for m in mounts {
        let found: Option<i64> = sqlx::query_scalar("SELECT id FROM dataset_versions WHERE id = ?")
            .bind(m.version_id)
            .fetch_optional(&mut *conn)
            .await?;
        if found.is_none() {
            return Ok(Some(m.name.clone()));
        }
    }
    Ok(None)
}

/// Records a new machine's mounts (inside its admission transaction).
pub async fn attach(conn: &mut SqliteConnection, machine_id: i64, mounts: &[DatasetMount]) -> Result<(), sqlx::Error> {
    for m in mounts {
        sqlx::query("INSERT INTO machine_datasets (machine_id, version_id, host_dir, target) VALUES (?, ?, ?, ?)")
            .bind(machine_id)
            .bind(m.version_id)
            .bind(&m.host_dir)
            .bind(&m.target)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// A machine's mounts, in the order they were asked for.
pub async fn of_machine(db: impl sqlx::SqliteExecutor<'_>, machine_id: i64) -> Result<Vec<DatasetMount>, sqlx::Error> {
    let rows: Vec<(i64, String, String, String, String)> = sqlx::query_as(
        "SELECT md.version_id, d.code, v.name, md.host_dir, md.target FROM machine_datasets md
         JOIN dataset_versions v ON v.id = md.version_id JOIN datasets d ON d.id = v.dataset_id
         WHERE md.machine_id = ? ORDER BY md.rowid",
    )
    .bind(machine_id)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(version_id, code, version, host_dir, target)| DatasetMount {
            version_id,
            name: format!("{code}/{version}"),
            host_dir,
            target,
        })
        .collect())
}

/// Machines that still may run with the version mounted and compute tasks
/// waiting to be placed with it; a version they use stays. A deleted or
/// lost machine never starts again, nor does a failed one that holds no
/// GPUs; a failed one that still holds them (a restart, reinstall or
/// rebalance that failed) accepts Restart and Reinstall, which mount it.
///
/// Named ("machine dev", "compute task #7"; at most [`NAMED`]) are those of
/// `group` — every one when `None` (an admin, who sees them all); those of
/// other groups, whose names and ids are not the asker's to see (a public
/// dataset is mounted across groups), are only counted.
pub async fn live_users(
    conn: &mut SqliteConnection,
    version_id: i64,
    group: Option<i64>,
) -> Result<LiveUsers, sqlx::Error> {
    let rows: Vec<(String, bool)> = sqlx::query_as(
        "SELECT 'machine ' || m.name, ?2 IS NULL OR m.group_id = ?2 FROM machine_datasets md JOIN machines m ON m.id = md.machine_id
         WHERE md.version_id = ?1 AND m.state NOT IN ('deleted', 'lost')
           AND NOT (m.state = 'failed' AND NOT EXISTS (SELECT 1 FROM machine_gpus mg WHERE mg.machine_id = m.id))
         UNION ALL
         SELECT 'compute task #' || c.id, ?2 IS NULL OR c.group_id = ?2 FROM compute_tasks c, json_each(c.datasets) j
         WHERE c.state = 'pending' AND json_extract(j.value, '$.version_id') = ?1",
    )
    .bind(version_id)
    .bind(group)
    .fetch_all(conn)
    .await?;
    let mut live = LiveUsers::default();
    for (name, visible) in rows {
        match visible {
            true if live.named.len() < NAMED => live.named.push(name),
            true => live.more += 1,
            false => live.others += 1,
        }
    }
    Ok(live)
}

/// How many of the asker's own users [`live_users`] names.
pub const NAMED: usize = 5;

/// What keeps a version from being deleted, as the asker may be told.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LiveUsers {
    /// The asker's group's machines and tasks, by name.
    pub named: Vec<String>,
    /// The asker's group's beyond those named.
    pub more: usize,
    /// Other groups': a count only.
    pub others: usize,
}

impl LiveUsers {
    pub fn is_empty(&self) -> bool {
        self.named.is_empty() && self.more == 0 && self.others == 0
    }

    /// "compute task #3, machine dev and 2 machines or compute tasks of
    /// other groups; …": who mounts it, and what the asker can do.
    pub fn refusal(&self, version: &str) -> String {
        let mut who = self.named.join(", ");
        if self.more > 0 {
            who.push_str(&format!(" and {} more of your group", self.more));
        }
        let theirs = match self.others {
            0 => String::new(),
            1 => "1 machine or compute task of another group".to_string(),
            n => format!("{n} machines or compute tasks of other groups"),
        };
        let (who, then) = match (who.is_empty(), theirs.is_empty()) {
            (false, true) => (who, "delete or cancel them first"),
            (true, false) => (theirs, "it can be deleted once they have ended"),
            _ => (format!("{who}, and by {theirs}"), "delete or cancel yours first; theirs must end too"),
        };
        format!("version {version} is mounted by {who}; {then}")
    }
}

/// Parses `code/version` items (comma, space or line separated) and
/// resolves them; no items need no stores.
pub async fn resolve_named(
    pool: &Pool,
    stores: Option<&Datasets>,
    user: &User,
    names: &str,
) -> Result<Vec<DatasetMount>, DatasetError> {
    let refs = gantry_core::datasets::parse_mounts(names)?;
    if refs.is_empty() {
        return Ok(Vec::new());
    }
    let stores = stores.ok_or(DatasetError::Unconfigured)?;
    resolve(pool, stores, user, &refs).await
}
