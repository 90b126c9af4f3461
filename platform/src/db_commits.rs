//! A count of the commits this process has made to its database, read
//! without touching the database: what lets the server keep a rendered page
//! for as long as nothing it shows can have changed (`page_cache` in the
//! server crate).
//!
//! The count moves in SQLite's WAL hook, which runs *after* a commit has
//! landed and its write lock is released — so a reader that sees the count
//! unchanged since it began cannot have missed a commit that the count was
//! moved for. (The commit hook runs before the commit lands: a page read in
//! between would be kept as current with the old rows.)
//!
//! Only this process's connections move it. Another process writing the
//! file (`sqlite3` by hand, a second `gantry`) goes unseen; whatever keeps
//! pages by this count also bounds how long (`page_cache` keeps one for a
//! second at most).

use std::{
    ffi::{c_char, c_int, c_void},
    sync::atomic::{AtomicU64, Ordering},
};

use libsqlite3_sys::{sqlite3, sqlite3_wal_checkpoint, sqlite3_wal_hook, SQLITE_OK};

/// Commits since the process started, by every pool it opened. One count
/// for all of them: several pools in one process (the HTTP tests) only make
/// each other's kept pages expire sooner.
static COMMITS: AtomicU64 = AtomicU64::new(0);

/// SQLite's own default: checkpoint once the WAL holds this many pages.
/// Installing a WAL hook replaces the automatic checkpoint, which is itself
/// a WAL hook, so [`on_commit`] does its work too.
const CHECKPOINT_PAGES: c_int = 1000;

/// The number of commits so far. `Acquire` pairs with the hook's `Release`:
/// whoever reads a count sees what the commits before it wrote.
pub fn commits() -> u64 {
    COMMITS.load(Ordering::Acquire)
}

/// Counts the commits of `conn` from now on (every pooled connection gets
/// it when it is opened, `db::connect`).
pub async fn count_commits(conn: &mut sqlx::SqliteConnection) -> Result<(), sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    let db = handle.as_raw_handle().as_ptr();
    // SAFETY: `db` is this connection's open handle, held locked for the
    // call; the hook takes no context pointer and only touches a static and
    // the handle SQLite passes it.
    unsafe {
        sqlite3_wal_hook(db, Some(on_commit), std::ptr::null_mut());
    }
    Ok(())
}

/// Runs on the connection's own thread after each commit in WAL mode.
unsafe extern "C" fn on_commit(_ctx: *mut c_void, db: *mut sqlite3, name: *const c_char, wal_pages: c_int) -> c_int {
    COMMITS.fetch_add(1, Ordering::Release);
    if wal_pages >= CHECKPOINT_PAGES {
        // A passive checkpoint, as SQLite's default hook runs; "busy" only
        // means readers held it back, and the next commit tries again.
        // SAFETY: `db` and `name` are the ones SQLite handed this call.
        unsafe {
            sqlite3_wal_checkpoint(db, name);
        }
    }
    SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_moves_the_count() {
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            let dir = tempfile::tempdir().unwrap();
            let pool = crate::db::connect_file(&dir.path().join("c.db")).await.unwrap();
            sqlx::query("CREATE TABLE t (x INTEGER)").execute(&pool).await.unwrap();
            // Other tests in this binary commit too: the count only grows.
            let before = commits();
            sqlx::query("INSERT INTO t VALUES (1)").execute(&pool).await.unwrap();
            let after_write = commits();
            assert!(after_write > before, "a committed insert must move the count");
        })
        .await
        .expect("the test finished in time");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_is_still_checkpointed_with_the_hook_installed() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("w.db");
            let pool = crate::db::connect_file(&file).await.unwrap();
            sqlx::query("CREATE TABLE t (x BLOB)").execute(&pool).await.unwrap();
            // 3,000 commits of a 4 KiB row: without checkpoints the WAL
            // would grow past 12 MiB; SQLite's default (and the hook's)
            // resets it every ~1,000 pages.
            for _ in 0..3000 {
                sqlx::query("INSERT INTO t VALUES (zeroblob(4096))").execute(&pool).await.unwrap();
            }
            let wal = std::fs::metadata(dir.path().join("w.db-wal")).map(|m| m.len()).unwrap_or(0);
            assert!(wal < 8 * 1024 * 1024, "the WAL grew to {wal} bytes: it is not being checkpointed");
        })
        .await
        .expect("the test finished in time");
    }
}
