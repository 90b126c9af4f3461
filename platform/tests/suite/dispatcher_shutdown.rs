//! A server that stops (Ctrl-C, SIGTERM) hands its unfinished operations
//! back to the queue at once: the next start resumes them without waiting
//! a lease period, and an operation that ends within the grace period ends
//! its own way. The node's engine here is a listener that accepts and never
//! answers, so the dispatcher is provably inside an engine call when told
//! to stop.

use gantry_platform::dispatch;
use gantry_testkit::engine::{env, Env};
use std::{sync::Arc, time::Duration};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

/// The test node's engine becomes `listener`, which never answers.
async fn mute_engine(env: &Env) -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("tcp://{}", listener.local_addr().unwrap());
    sqlx::query("UPDATE nodes SET executor = 'docker', docker_endpoint = ? WHERE id = ?")
        .bind(endpoint)
        .bind(env.node_id)
        .execute(&env.pool)
        .await
        .unwrap();
    listener
}

/// The dispatcher's loop, stoppable as `gantry serve` stops it.
fn start(env: &Env, grace: Duration) -> (oneshot::Sender<()>, JoinHandle<()>, Arc<str>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let mut dispatcher = env.dispatcher.clone();
    dispatcher.owner = dispatch::new_owner_id();
    let owner = dispatcher.owner.clone();
    let run = tokio::spawn(dispatcher.run_until(
        async move {
            let _ = stopped.await;
        },
        grace,
    ));
    (stop, run, owner)
}

async fn task_row(env: &Env, id: i64) -> (String, String, Option<String>) {
    sqlx::query_as("SELECT state, message, lease_owner FROM tasks WHERE id = ?")
        .bind(id)
        .fetch_one(&env.pool)
        .await
        .unwrap()
}

async fn create_task(env: &Env) -> i64 {
    let alice = env.user("alice", "ml-team").await;
    let created = env.admissions.create(env.create(&alice, "box", 1)).await.unwrap();
    created.task_id
}

gantry_testkit::timed_test! {
    async fn a_stopping_server_hands_its_unfinished_operation_back_at_once() {
        let env = env("simulated", 2, 2).await;
        let listener = mute_engine(&env).await;
        let task = create_task(&env).await;
        let (stop, run, owner) = start(&env, Duration::ZERO);

        // The create is inside an engine call that will not return.
        let (_held, _) = listener.accept().await.unwrap();
        let (state, _, lease) = task_row(&env, task).await;
        assert_eq!((state.as_str(), lease.as_deref()), ("running", Some(owner.as_ref())));

        stop.send(()).unwrap();
        run.await.unwrap();
        let (state, message, lease) = task_row(&env, task).await;
        assert_eq!(state, "scheduled", "{message}");
        assert!(message.contains("shut down"), "{message}");
        assert_eq!(lease, None);
        let audited = env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'task.lease_released'").await;
        assert_eq!(audited, 1);

        // The next process claims it now, not a lease period later.
        let next = dispatch::new_owner_id();
        let claimed = dispatch::claim(&env.pool, &next, 8).await.unwrap();
        assert_eq!(claimed.iter().map(|t| t.id).collect::<Vec<_>>(), vec![task]);
    }
}

gantry_testkit::timed_test! {
    async fn an_operation_that_ends_within_the_grace_period_ends_its_own_way() {
        let env = env("simulated", 2, 2).await;
        let listener = mute_engine(&env).await;
        let task = create_task(&env).await;
        let (stop, run, _) = start(&env, Duration::from_secs(600));

        let (held, _) = listener.accept().await.unwrap();
        stop.send(()).unwrap();
        // The engine hangs up: the call fails, and the operation records
        // that itself (a retry later) instead of being cut off.
        drop(held);
        drop(listener);
        run.await.unwrap();
        let (state, message, lease) = task_row(&env, task).await;
        assert!(!message.contains("shut down"), "the grace period let it finish: {message}");
        assert_ne!(state, "running", "{message}");
        assert_eq!(lease, None);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'task.lease_released'").await, 0);
    }
}
