//! A temporary installation: a directory with a SQLite database migrated
//! as `gantry serve` migrates it, and the accounts and nodes tests put in
//! it. The other installations (`engine`, `datasets`, `telemetry`, and
//! `serve` with the router) start from here.

use gantry_core::Role;
use gantry_platform::{
    accounts::{self, NewUser, User},
    cluster::{self, NodeRegistration},
    db, gpus, PlatformError,
};
use std::path::{Path, PathBuf};

/// A temporary directory and its migrated database (`gantry.db`), removed
/// when dropped.
pub struct Install {
    pub dir: tempfile::TempDir,
    pub pool: db::Pool,
}

impl Install {
    pub async fn new() -> Install {
        let dir = tempfile::tempdir().unwrap();
        let pool = database(dir.path()).await;
        Install { dir, pool }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where the database is: `gantry.db` in the directory.
    pub fn db_path(&self) -> PathBuf {
        db_path(self.dir.path())
    }

    /// A group with a quota of `quota` GPUs.
    pub async fn group(&self, name: &str, quota: i64) {
        accounts::create_group(&self.pool, None, name, quota).await.unwrap();
    }

    /// An account in `group` (None: in none).
    pub async fn user(&self, name: &str, password: &str, role: Role, group: Option<&str>) -> User {
        user(&self.pool, name, password, role, group).await
    }

    /// The one integer `sql` selects.
    pub async fn count(&self, sql: &str) -> i64 {
        count(&self.pool, sql).await
    }
}

/// `gantry.db` in `dir`.
pub fn db_path(dir: &Path) -> PathBuf {
    dir.join("gantry.db")
}

/// Opens (or creates) `gantry.db` in `dir` and migrates it.
pub async fn database(dir: &Path) -> db::Pool {
    let pool = db::connect_file(&db_path(dir)).await.unwrap();
    db::migrate(&pool).await.unwrap();
    pool
}

/// An account in `group` (None: in none).
pub async fn user(pool: &db::Pool, name: &str, password: &str, role: Role, group: Option<&str>) -> User {
    accounts::create_user(pool, None, NewUser { username: name, password, role, group }).await.unwrap()
}

/// The one integer `sql` selects.
pub async fn count(pool: &db::Pool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// Registers (or, as a restarted `gantry serve` does, registers again) a
/// node named `name` on the simulated engine with `gpus`, in region `local`.
pub async fn register_simulated(
    pool: &db::Pool,
    name: &str,
    gpus: &[gpus::DiscoveredGpu],
) -> Result<i64, PlatformError> {
    let endpoint = format!("simulated://{name}");
    let reg = NodeRegistration {
        name,
        region_code: "local",
        docker_endpoint: &endpoint,
        volume_dir: "",
        executor: "simulated",
        cpu_count: 2,
        memory_mb: 1024,
        gpus,
    };
    cluster::register_node(pool, reg).await
}
