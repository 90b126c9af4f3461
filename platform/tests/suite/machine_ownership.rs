//! Group members see each other's machines, but only a machine's owner (or
//! an admin) restarts, reinstalls or deletes it — a delete takes the owner's
//! data volume — and only the owner (or an admin) sees, attaches or deletes
//! their kept volumes. A compute task's machine ends with its task. A
//! cancelled create made on a kept volume gives the volume back.

use crate::reclaim_common;
use gantry_testkit::engine;

use engine::{compute_job, env, torch_catalogue};
use gantry_core::task::TaskKind;
use gantry_platform::{
    compute::{self, Command},
    executor::{ExecError, Executor, SimulatedExecutor},
    machines::{self, OperationRequest},
    reconcile, transitions, PlatformError,
};

fn op(machine_id: i64, kind: TaskKind, keep_volume: bool) -> OperationRequest {
    OperationRequest { machine_id, kind, keep_volume }
}

gantry_testkit::timed_test! {
    async fn only_the_owner_or_an_admin_operates_a_machine_and_uses_its_kept_volume() {
        let env = env("simulated", 4, 4).await;
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        let bob = env.user("bob", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "alices", 1)).await.unwrap().machine_id;
        env.drive().await;

        // Bob sees Alice's machine but may not act on it; nothing is queued.
        assert!(machines::machine_detail(&env.pool, &bob, m).await.is_ok(), "group members see each other's machines");
        for kind in [TaskKind::Restart, TaskKind::Reinstall, TaskKind::Delete] {
            let refused = machines::request_operation(&env.pool, &bob, op(m, kind, false)).await.unwrap_err();
            assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("only machine alices's owner, or an admin")), "{refused}");
        }
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM tasks WHERE machine_id = {m}")).await, 1, "only its create");
        // An admin may.
        machines::request_operation(&env.pool, &root, op(m, TaskKind::Restart, false)).await.unwrap();
        env.drive().await;

        // Alice deletes it and keeps the volume: hers alone to list, attach or delete.
        machines::request_operation(&env.pool, &alice, op(m, TaskKind::Delete, true)).await.unwrap();
        env.drive().await;
        let kept = machines::list_kept_volumes(&env.pool, &alice).await.unwrap();
        assert_eq!(kept.len(), 1);
        assert!(machines::list_kept_volumes(&env.pool, &bob).await.unwrap().is_empty(), "a colleague does not see it");
        assert_eq!(machines::list_kept_volumes(&env.pool, &root).await.unwrap().len(), 1, "an admin does");
        let mut take = env.create(&bob, "bobs", 1);
        take.kept_volume_id = Some(kept[0].id);
        let refused = env.admissions.create(take).await.unwrap_err().to_string();
        assert!(refused.contains("kept volume does not exist"), "{refused}");
        assert!(machines::delete_kept_volume(&env.pool, &bob, kept[0].id).await.is_err());
        assert_eq!(machines::list_kept_volumes(&env.pool, &alice).await.unwrap().len(), 1, "still there");
        let mut mine = env.create(&alice, "again", 1);
        mine.kept_volume_id = Some(kept[0].id);
        env.admissions.create(mine).await.unwrap();
        env.drive().await;
        assert!(machines::list_kept_volumes(&env.pool, &alice).await.unwrap().is_empty(), "mounted again");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_compute_tasks_machine_ends_with_its_task() {
        let env = env("simulated", 2, 2).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let root = reclaim_common::admin(&env.pool).await;
        let alice = env.user("alice", "ml-team").await;
        torch_catalogue(&env, &root).await;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["sleep".into(), "60".into()]))).await.unwrap();
        env.drive().await;
        let machine = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", t.id)).await;
        let refused = machines::request_operation(&env.pool, &alice, op(machine, TaskKind::Delete, false)).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("cancel the task instead")), "{refused}");
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "running", "the task goes on");
    }
}

gantry_testkit::timed_test! {
    async fn cancelling_a_create_made_on_a_kept_volume_keeps_the_volume() {
        let env = env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let first = env.admissions.create(env.create(&alice, "first", 1)).await.unwrap().machine_id;
        env.drive().await;
        machines::request_operation(&env.pool, &alice, op(first, TaskKind::Delete, true)).await.unwrap();
        env.drive().await;
        let kept = machines::list_kept_volumes(&env.pool, &alice).await.unwrap();
        let volume = kept[0].name.clone();
        let on_kept = |name: &str, id: i64| {
            let mut req = env.create(&alice, name, 1);
            req.kept_volume_id = Some(id);
            req
        };

        // Cancelled before it ran: the volume is kept again, and the collector leaves it.
        let second = env.admissions.create(on_kept("second", kept[0].id)).await.unwrap();
        assert!(machines::list_kept_volumes(&env.pool, &alice).await.unwrap().is_empty(), "taken by the create");
        transitions::task::cancel(&env.pool, &alice, second.task_id).await.unwrap();
        let again = machines::list_kept_volumes(&env.pool, &alice).await.unwrap();
        assert_eq!(again.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), vec![volume.as_str()]);
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(sim.volume_names().contains(&volume), "the collector left it");

        // Its container made, the start waiting to retry, then cancelled:
        // the container is deleted through the engine, the volume kept.
        sim.fail_next("start_container", ExecError::Unavailable("engine restarting".into()));
        let third = env.admissions.create(on_kept("third", again[0].id)).await.unwrap();
        env.drive().await;
        assert_eq!(sim.containers().len(), 1, "its container exists");
        transitions::task::cancel(&env.pool, &alice, third.task_id).await.unwrap();
        sqlx::query("UPDATE tasks SET not_before = 0").execute(&env.pool).await.unwrap();
        env.drive().await;
        assert!(sim.containers().is_empty());
        let kept = machines::list_kept_volumes(&env.pool, &alice).await.unwrap();
        assert_eq!(kept.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), vec![volume.as_str()]);
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(sim.volume_names().contains(&volume));

        // A create with a volume of its own, cancelled, keeps nothing.
        let fourth = env.admissions.create(env.create(&alice, "fourth", 1)).await.unwrap();
        transitions::task::cancel(&env.pool, &alice, fourth.task_id).await.unwrap();
        assert_eq!(machines::list_kept_volumes(&env.pool, &alice).await.unwrap().len(), 1);
        env.assert_quota_consistent().await;
    }
}
