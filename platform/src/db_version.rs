//! The database file's data version: a number that changes whenever a
//! transaction is committed to the file — by any connection, of this
//! process or another (a second `gantry serve` on the same database,
//! `sqlite3` by hand). What lets the server keep a rendered page for as long
//! as nothing it shows can have changed (`page_cache` in the server crate).
//!
//! Read with `PRAGMA data_version` on a connection of its own that never
//! writes (the pragma leaves out the calling connection's own commits). A
//! read begins a read transaction, which sees every commit that landed
//! before it: whoever reads the same number before and after a render has
//! rendered the rows as they are. (A count moved in a commit hook would
//! not do: that hook runs before the commit lands.)

use crate::{db::Pool, PlatformError};
use sqlx::{sqlite::SqliteConnection, ConnectOptions};
use tokio::sync::Mutex;

pub struct DataVersion {
    conn: Mutex<SqliteConnection>,
}

impl DataVersion {
    /// A connection of its own to `pool`'s database, with the pool's settings.
    pub async fn open(pool: &Pool) -> Result<Self, PlatformError> {
        let conn = pool.connect_options().connect().await?;
        Ok(DataVersion { conn: Mutex::new(conn) })
    }

    /// The current version. Only equality means anything: two reads give the
    /// same number only if nothing was committed in between. (sqlx resets
    /// the statement once its row is read, so no read transaction stays open
    /// to hold back checkpoints.)
    pub async fn read(&self) -> Result<i64, PlatformError> {
        let mut conn = self.conn.lock().await;
        Ok(sqlx::query_scalar("PRAGMA data_version").fetch_one(&mut *conn).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_commit_moves_the_version_a_read_does_not() {
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("v.db");
            let pool = crate::db::connect_file(&file).await.unwrap();
            sqlx::query("CREATE TABLE t (x INTEGER)").execute(&pool).await.unwrap();
            let version = DataVersion::open(&pool).await.unwrap();
            let v0 = version.read().await.unwrap();
            let _: i64 = sqlx::query_scalar("SELECT count(*) FROM t").fetch_one(&pool).await.unwrap();
            assert_eq!(version.read().await.unwrap(), v0, "a read changes nothing");

            sqlx::query("INSERT INTO t VALUES (1)").execute(&pool).await.unwrap();
            let v1 = version.read().await.unwrap();
            assert_ne!(v1, v0, "a commit through the pool");

            // Another process's commit, as a second server's: a connection
            // that shares nothing with this pool.
            let other = crate::db::connect_file(&file).await.unwrap();
            sqlx::query("INSERT INTO t VALUES (2)").execute(&other).await.unwrap();
            assert_ne!(version.read().await.unwrap(), v1, "a commit by another connection");

            let mut tx = pool.begin().await.unwrap();
            let v2 = version.read().await.unwrap();
            sqlx::query("INSERT INTO t VALUES (3)").execute(&mut *tx).await.unwrap();
            assert_eq!(version.read().await.unwrap(), v2, "nothing committed yet");
            tx.rollback().await.unwrap();
            assert_eq!(version.read().await.unwrap(), v2, "a rollback commits nothing");
        })
        .await
        .expect("the test finished in time");
    }
}
