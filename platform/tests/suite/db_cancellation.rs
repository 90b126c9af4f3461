//! A write transaction whose caller goes away while it is being started (a
//! client that hung up, a task aborted at shutdown) leaves nothing behind.
//! Before, sqlx's `BEGIN IMMEDIATE` could hand its connection back to the
//! pool still inside a transaction holding SQLite's write lock, and from
//! then on every write of the process failed with "database is locked"
//! (seen as a server that could not hand its work back when stopped).

use gantry_platform::db;
use sqlx::{sqlite::SqliteConnectOptions, Connection, SqliteConnection};
use std::{future::Future, pin::pin, task::Poll, time::Duration};

/// Whether some connection holds the write lock now; asks without waiting.
async fn write_lock_held(probe: &mut SqliteConnection) -> bool {
    match sqlx::query("BEGIN IMMEDIATE").execute(&mut *probe).await {
        Ok(_) => {
            sqlx::query("ROLLBACK").execute(&mut *probe).await.unwrap();
            false
        }
        Err(e) => {
            assert!(e.to_string().contains("locked"), "the probe failed otherwise: {e}");
            true
        }
    }
}

/// One poll of `fut`, without waiting.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *fut).poll(cx))).await
}

gantry_testkit::timed_test! {
    limit = 120;
    async fn a_transaction_abandoned_while_it_starts_never_keeps_the_database_locked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gantry.db");
        let pool = db::connect_file(&path).await.unwrap();
        sqlx::query("CREATE TABLE t (x INTEGER)").execute(&pool).await.unwrap();
        let probe_opts = SqliteConnectOptions::new().filename(&path).busy_timeout(Duration::ZERO);
        let mut probe = SqliteConnection::connect_with(&probe_opts).await.unwrap();

        // Abandon begins at the moment their `BEGIN` has run but the caller
        // has not got its transaction yet, until that has happened 20 times.
        let (mut abandoned, mut attempts) = (0, 0);
        while abandoned < 20 && attempts < 2_000 {
            attempts += 1;
            {
                let mut begin = pin!(db::begin_immediate(&pool));
                loop {
                    if let Poll::Ready(tx) = poll_once(&mut begin).await {
                        drop(tx.unwrap()); // started before we looked: rolled back
                        break;
                    }
                    if write_lock_held(&mut probe).await {
                        abandoned += 1;
                        break; // its caller goes away now
                    }
                    tokio::task::yield_now().await;
                }
            }
            // The next writer gets in (waiting, at most the busy timeout,
            // for the abandoned transaction to be rolled back).
            let mut tx = db::begin_immediate(&pool).await.unwrap_or_else(|e| panic!("a write after abandoned begin #{abandoned}: {e}"));
            sqlx::query("INSERT INTO t VALUES (?)").bind(attempts).execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
        }
        assert!(abandoned > 0, "no begin was caught half-way in {attempts} attempts: the test proved nothing");
        // Every write landed, on whichever connection.
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t").fetch_one(&pool).await.unwrap();
        assert_eq!(rows, attempts);
        assert!(!write_lock_held(&mut probe).await, "the write lock is free at the end");
    }
}
