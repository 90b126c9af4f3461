//! "Start when GPUs are free" (issue 35, part 1) on the simulated engine:
//! a start with no room waits in its group's line, first come first
//! served, with its place shown; it begins when another machine stops
//! (through the same start, same admission); the owner (or an admin) can
//! cancel it, others cannot; a refused try leaves nothing behind. A start
//! with no room on its node says its volume cannot follow to a node of the
//! region that has room.

use crate::reclaim_common::{machine_state, task_outcome};
use crate::reclaim_snapshots::counts;
use gantry_core::task::TaskKind;
use gantry_platform::{
    accounts::{self, User},
    cluster::{self, NodeRegistration},
    executor::{Executor, SimulatedExecutor},
    gpus::{self, SimulatedGpus},
    reclaim,
    schedules::{self, StartOutcome},
    PlatformError,
};
use gantry_testkit::engine;

async fn in_use(env: &engine::Env) -> i64 {
    env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await
}

/// A 2-GPU node and a 2-GPU quota; alice's machines pp and qq shut down,
/// and rr and ss (1 GPU each) holding both GPUs.
async fn full_group() -> (engine::Env, User, [i64; 4]) {
    let env = engine::env("simulated", 2, 2).await;
    env.use_executor(Executor::from(SimulatedExecutor::new()));
    let alice = env.user("alice", "ml-team").await;
    let mut ids = [0; 4];
    for (i, name) in ["pp", "qq"].iter().enumerate() {
        ids[i] = env.admissions.create(env.create(&alice, name, 1)).await.unwrap().machine_id;
    }
    env.drive().await;
    for m in &ids[..2] {
        reclaim::stop(&env.pool, &alice, *m).await.unwrap();
    }
    env.drive().await;
    for (i, name) in ["rr", "ss"].iter().enumerate() {
        ids[2 + i] = env.admissions.create(env.create(&alice, name, 1)).await.unwrap().machine_id;
    }
    env.drive().await;
    assert_eq!(in_use(&env).await, 2);
    (env, alice, ids)
}

fn queued_text(outcome: StartOutcome) -> String {
    match outcome {
        StartOutcome::Queued { place, why } => format!("{} / {why}", place.text),
        StartOutcome::Started { task_id } => panic!("started at once (task #{task_id})"),
    }
}

gantry_testkit::timed_test! {
    async fn a_queued_start_waits_its_turn_and_begins_when_another_machine_stops() {
        let (env, alice, [p, q, r, s]) = full_group().await;
        let before = counts(&env).await;
        // Without the tick box: refused with the numbers, as before.
        let refused = schedules::start(&env.pool, &alice, p, false).await.unwrap_err().to_string();
        assert!(refused.contains("start of pp refused") && refused.contains("holds 2 of 2 GPUs"), "{refused}");
        let failed = env.scalar("SELECT COUNT(*) FROM tasks WHERE state = 'failed'").await;
        // With it: in line, first come first served, nothing else written.
        let first = queued_text(schedules::start(&env.pool, &alice, p, true).await.unwrap());
        assert!(first.starts_with("1st in line in group ml-team") && first.contains("holds 2 of 2 GPUs"), "{first}");
        let second = queued_text(schedules::start(&env.pool, &alice, q, true).await.unwrap());
        assert!(second.starts_with("2nd in line in group ml-team"), "{second}");
        // Asked again: the same place, not a second entry.
        let again = queued_text(schedules::start(&env.pool, &alice, q, true).await.unwrap());
        assert!(again.starts_with("2nd in line"), "{again}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE state = 'failed'").await, failed, "waiting records no failure");
        assert_eq!((counts(&env).await.2, counts(&env).await.3), (before.2, before.3), "no GPU changed hands");
        let view = schedules::get(&env.pool, &alice, q).await.unwrap();
        assert_eq!(view.queued.unwrap().text, "2nd in line in group ml-team");
        // Nothing is free yet: serving the line starts nothing.
        assert!(schedules::serve(&env.pool).await.unwrap().is_empty());

        // r stops: its GPU goes to the head of the line at once.
        reclaim::stop(&env.pool, &alice, r).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, p).await.0, "running", "the head started when r stopped");
        assert_eq!(machine_state(&env.pool, q).await.0, "reclaimed");
        assert_eq!(schedules::queue_place(&env.pool, q).await.unwrap().unwrap().text, "1st in line in group ml-team");
        assert!(schedules::queue_place(&env.pool, p).await.unwrap().is_none(), "its wait ended with its start");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'machine.start_queued'").await, 2);
        assert_eq!(in_use(&env).await, 2);
        env.assert_quota_consistent().await;

        // q's owner cancels: s stopping then starts nothing.
        schedules::cancel_queued_start(&env.pool, &alice, q).await.unwrap();
        assert!(schedules::queue_place(&env.pool, q).await.unwrap().is_none());
        let twice = schedules::cancel_queued_start(&env.pool, &alice, q).await.unwrap_err().to_string();
        assert!(twice.contains("is not waiting for GPUs"), "{twice}");
        reclaim::stop(&env.pool, &alice, s).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, q).await.0, "reclaimed", "a cancelled start does not begin");
        assert_eq!(in_use(&env).await, 1);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn only_the_owner_or_an_admin_cancels_and_another_group_sees_nothing() {
        let (env, alice, [p, ..]) = full_group().await;
        schedules::start(&env.pool, &alice, p, true).await.unwrap();
        let bob = env.user("bob", "ml-team").await;
        let refused = schedules::cancel_queued_start(&env.pool, &bob, p).await.unwrap_err().to_string();
        assert!(refused.contains("only machine pp's owner, or an admin"), "{refused}");
        let refused = schedules::start(&env.pool, &bob, p, true).await.unwrap_err().to_string();
        assert!(refused.contains("owner, or an admin"), "{refused}");
        accounts::create_group(&env.pool, None, "other", 4).await.unwrap();
        let carol = env.user("carol", "other").await;
        assert!(matches!(schedules::cancel_queued_start(&env.pool, &carol, p).await, Err(PlatformError::NotFound(_))));
        assert!(matches!(schedules::start(&env.pool, &carol, p, true).await, Err(PlatformError::NotFound(_))));
        assert!(matches!(schedules::get(&env.pool, &carol, p).await, Err(PlatformError::NotFound(_))));
        assert_eq!(schedules::queue_place(&env.pool, p).await.unwrap().unwrap().place, 1, "still in line");
        let root = crate::reclaim_common::admin(&env.pool).await;
        schedules::cancel_queued_start(&env.pool, &root, p).await.unwrap();
        assert!(schedules::queue_place(&env.pool, p).await.unwrap().is_none());
    }
}

gantry_testkit::timed_test! {
    async fn a_start_shows_as_start_in_the_task_history() {
        let (env, alice, [p, _, r, _]) = full_group().await;
        reclaim::stop(&env.pool, &alice, r).await.unwrap();
        env.drive().await;
        let StartOutcome::Started { task_id } = schedules::start(&env.pool, &alice, p, false).await.unwrap() else {
            panic!("no room")
        };
        let tasks = gantry_platform::machines::list_tasks(&env.pool, &alice, Some(p), 10).await.unwrap();
        let start = tasks.iter().find(|t| t.id == task_id).unwrap();
        assert_eq!(start.kind, TaskKind::Restore);
        assert_eq!(start.shown_kind(), "start");
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task_id).await.0, "succeeded");
    }
}

gantry_testkit::timed_test! {
    async fn a_start_with_no_room_on_its_node_says_its_volume_cannot_follow_to_one_with_room() {
        let (env, alice, [p, ..]) = full_group().await;
        sqlx::query("UPDATE groups SET gpu_quota = 8 WHERE name = 'ml-team'").execute(&env.pool).await.unwrap();
        // A second node of the same region, with both its GPUs free.
        let sim = SimulatedGpus { count: 2, model: "SIM-A100".into(), memory_mb: 81920 };
        let reg = NodeRegistration {
            name: "spare",
            region_code: "local",
            docker_endpoint: "simulated://spare",
            volume_dir: "",
            executor: "simulated",
            cpu_count: 2,
            memory_mb: 1024,
            gpus: &gpus::simulated("spare", &sim),
        };
        cluster::register_node(&env.pool, reg).await.unwrap();
        let home = env.text(&format!("SELECT n.name FROM nodes n JOIN machines m ON m.node_id = n.id WHERE m.id = {p}")).await;
        let before = counts(&env).await;
        let text = schedules::start(&env.pool, &alice, p, false).await.unwrap_err().to_string();
        assert!(text.contains(&format!("its volume and snapshot live on node {home} and cannot move")), "{text}");
        assert!(text.contains(&format!("node {home} has 0 free SIM-A100 GPU(s), it needs 1")), "{text}");
        assert!(text.contains("node spare of its region has room, but the machine cannot follow"), "{text}");
        assert_eq!((counts(&env).await.2, counts(&env).await.3), (before.2, before.3), "nothing changed");
        assert_eq!(machine_state(&env.pool, p).await.0, "reclaimed");
    }
}

gantry_testkit::timed_test! {
    async fn a_waiting_start_begins_when_another_machine_is_deleted() {
        let (env, alice, [p, q, r, _s]) = full_group().await;
        queued_text(schedules::start(&env.pool, &alice, p, true).await.unwrap());
        queued_text(schedules::start(&env.pool, &alice, q, true).await.unwrap());
        // r is deleted: the delete's commit returns its GPU and the head
        // of the line starts then, not at the schedule loop's next tick.
        let op = gantry_platform::machines::OperationRequest { machine_id: r, kind: TaskKind::Delete, keep_volume: false };
        gantry_platform::machines::request_operation(&env.pool, &alice, op).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, r).await.0, "deleted");
        assert_eq!(machine_state(&env.pool, p).await.0, "running", "the head started when r was deleted");
        assert_eq!(schedules::queue_place(&env.pool, q).await.unwrap().unwrap().text, "1st in line in group ml-team");
        env.assert_quota_consistent().await;

    }
}

gantry_testkit::timed_test! {
    async fn a_waiting_start_begins_when_an_admin_raises_the_groups_quota() {
        // A 3-GPU node and a 1-GPU quota: pp shut down, rr holding the one.
        let env = engine::env("simulated", 3, 1).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let p = env.admissions.create(env.create(&alice, "pp", 1)).await.unwrap().machine_id;
        env.drive().await;
        reclaim::stop(&env.pool, &alice, p).await.unwrap();
        env.drive().await;
        env.admissions.create(env.create(&alice, "rr", 1)).await.unwrap();
        env.drive().await;
        let waiting = queued_text(schedules::start(&env.pool, &alice, p, true).await.unwrap());
        assert!(waiting.contains("holds 1 of 1 GPU"), "{waiting}");
        // The raise's commit is room: the line is served then.
        gantry_platform::policy::update_group_policy(&env.pool, None, alice.group_id, 2, 1, &[]).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, p).await.0, "running", "the waiting start began with the raise");
        assert!(schedules::queue_place(&env.pool, p).await.unwrap().is_none());
        assert_eq!(in_use(&env).await, 2);
        env.assert_quota_consistent().await;
    }
}
