//! The SQLite file: opening it with the settings Gantry relies on, and
//! applying the migrations in `migrations/`.

use crate::PlatformError;
use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous},
    Connection, Sqlite, Transaction,
};
use std::{path::Path, str::FromStr, time::Duration};

pub type Pool = SqlitePool;

/// A write transaction on a pooled connection.
pub type Tx = Transaction<'static, Sqlite>;

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Opens (creating if needed) the database at `url` — a `sqlite:` URL or a
/// plain file path.
pub async fn connect(url: &str) -> Result<Pool, PlatformError> {
    let opts = if url.starts_with("sqlite:") {
        SqliteConnectOptions::from_str(url)?
    } else {
        SqliteConnectOptions::new().filename(url)
    }
    .create_if_missing(true)
    // WAL lets readers (page renders) proceed while one writer commits.
    .journal_mode(SqliteJournalMode::Wal)
    // NORMAL in WAL mode is durable against process crashes; a power loss can
    // drop the last transactions but never corrupts the file.
    .synchronous(SqliteSynchronous::Normal)
    .foreign_keys(true)
    .busy_timeout(Duration::from_secs(10));
    // No idle reaper and no lifetime recycling: connections to a local file
    // are cheap to keep, and sqlx 0.8's reaper has been seen to strand the
    // pool's permits under load (a silent hang); acquiring is bounded so a
    // starved pool fails with an error instead of waiting for ever.
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(Duration::from_secs(30))
        // No ping before each acquire: a connection to a local file cannot
        // have gone away, and the ping is a round trip to the connection's
        // thread — about as many thread switches as the queries of a page.
        .test_before_acquire(false)
        // Never hand out a connection still inside a transaction: one left
        // open by a cancelled begin would run its borrower's writes inside
        // it (lost at close) and hold SQLite's write lock for good. Closing
        // the connection rolls it back. A sync read of sqlx's own count:
        // free. (`begin_immediate` keeps this from arising; this backstop
        // sees only transactions sqlx counts, and only when the connection
        // is next handed out — until then its lock holds.)
        .before_acquire(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
        .connect_with(opts)
        .await?;
    Ok(pool)
}

/// `BEGIN IMMEDIATE` on a pooled connection: takes SQLite's write lock up
/// front, so a read-then-write never fails half-way with
/// `SQLITE_BUSY_SNAPSHOT` — and safe to cancel. sqlx 0.8's begin with a
/// custom statement awaits once more after the `BEGIN` has run; a caller
/// dropped there (a client that hung up, a task aborted at shutdown)
/// returned the connection to the pool inside a transaction that held the
/// write lock for ever, and every later write failed with "database is
/// locked". Run as a task of its own the begin always completes, and a
/// transaction nobody waits for any more is dropped there, which rolls
/// it back.
pub async fn begin_immediate(pool: &Pool) -> Result<Tx, PlatformError> {
    let pool = pool.clone();
    match tokio::spawn(async move { pool.begin_with("BEGIN IMMEDIATE").await }).await {
        Ok(begun) => Ok(begun?),
        Err(e) => Err(PlatformError::Internal(format!("starting a transaction: {e}"))),
    }
}

pub async fn connect_file(path: &Path) -> Result<Pool, PlatformError> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)
                .map_err(|e| PlatformError::Internal(format!("cannot create {}: {e}", dir.display())))?;
        }
    }
    private_file(path)?;
    connect(&path.to_string_lossy()).await
}

/// The database file readable by its owner only (0600), made so before
/// SQLite opens it: SQLite gives its `-wal` and `-shm` files the database
/// file's mode. It holds sessions (a cookie's value is a row's key) and
/// password hashes.
pub fn private_file(path: &Path) -> Result<(), PlatformError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let made = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path);
    made.and_then(|_| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)))
        .map_err(|e| PlatformError::Internal(format!("cannot make {} private: {e}", path.display())))
}

/// Applies pending migrations on one connection with foreign keys off (a
/// table rebuild must not cascade deletes; SQLite ignores the pragma inside
/// the migration's own transaction), then checks every foreign key.
pub async fn migrate(pool: &Pool) -> Result<(), PlatformError> {
    let mut conn = pool.acquire().await?;
    sqlx::query("PRAGMA foreign_keys = OFF").execute(&mut *conn).await?;
    let applied = MIGRATOR.run(&mut *conn).await;
    let broken: Vec<(String, i64, String)> =
        sqlx::query_as("SELECT \"table\", rowid, parent FROM pragma_foreign_key_check")
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_default();
    sqlx::query("PRAGMA foreign_keys = ON").execute(&mut *conn).await?;
    applied?;
    if let Some((table, rowid, parent)) = broken.first() {
        return Err(PlatformError::Internal(format!(
            "migrations left {} broken foreign key(s), e.g. {table} row {rowid} → {parent}",
            broken.len()
        )));
    }
    Ok(())
}

/// Whether the database answers a trivial query (the health check).
pub async fn ping(pool: &Pool) -> Result<(), PlatformError> {
    sqlx::query("SELECT 1").execute(pool).await?;
    Ok(())
}
