//! Terminal session rows a server wrote but no terminal holds — the
//! request was cut off between writing the row and registering the
//! terminal — are closed by that server's watcher instead of staying open
//! (renewed, and out of an admin's reach) until the process stops.

use gantry_testkit::engine;

use gantry_platform::workspace::sessions::{self, Registry};

gantry_testkit::timed_test! {
    async fn a_session_row_no_terminal_holds_is_closed_by_its_own_server() {
        let env = engine::env("simulated", 1, 1).await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "box", 1)).await.unwrap().machine_id;
        env.drive().await;
        let registry = Registry::start(env.pool.clone());
        let open = |addr: &'static str| sessions::open(&env.pool, &alice, m, "box", registry.server_id(), addr);
        let orphan = open("127.0.0.1:1").await.unwrap();
        let live = open("127.0.0.1:2").await.unwrap();
        let _held = registry.register(live);
        let starting = open("127.0.0.1:3").await.unwrap();
        // A minute and more ago, but for the one whose request is still
        // on its way to registering its terminal.
        sqlx::query("UPDATE terminal_sessions SET opened_at = opened_at - 120 WHERE id IN (?, ?)").bind(orphan).bind(live).execute(&env.pool).await.unwrap();

        registry.watch_once(true).await.unwrap();
        let state = |id: i64| {
            let pool = env.pool.clone();
            async move {
                sqlx::query_as::<_, (Option<i64>, String)>("SELECT closed_at, close_reason FROM terminal_sessions WHERE id = ?")
                    .bind(id)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        };
        let (closed, reason) = state(orphan).await;
        assert!(closed.is_some(), "the orphan row is closed");
        assert_eq!(reason, "its request ended before the terminal started");
        assert_eq!(state(live).await.0, None, "a registered terminal stays open");
        assert_eq!(state(starting).await.0, None, "a row just written may still be registered");
    }
}
