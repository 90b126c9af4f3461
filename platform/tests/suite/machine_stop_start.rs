//! Stop and start of a dev machine (issue 35, part 1) on the simulated
//! engine: a stop puts the machine away as the idle reclaim does (snapshot,
//! container removed, GPUs back at once) and marks it shut down; start is
//! admitted again under the group's quota, refused with the numbers and
//! nothing changed when there is no room; a job's or another user's
//! machine is not stopped; stop then delete leaves nothing; a stop cut off
//! mid-way is resumed by the next runner.

use crate::reclaim_common::{machine_state, task_outcome};
use crate::reclaim_snapshots::{counts, running, sim_env};
use gantry_testkit::engine::{self, compute_job};

use gantry_core::task::TaskKind;
use gantry_platform::{
    accounts::User,
    compute::{self, Command},
    executor::SimulatedExecutor,
    machines::{self, OperationRequest},
    reclaim, reconcile, transitions, PlatformError,
};

async fn in_use(env: &engine::Env) -> i64 {
    env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await
}

async fn shut_down(env: &engine::Env, m: i64) -> bool {
    env.scalar(&format!("SELECT shut_down FROM machines WHERE id = {m}")).await == 1
}

async fn delete(env: &engine::Env, who: &User, m: i64) -> i64 {
    let op = OperationRequest { machine_id: m, kind: TaskKind::Delete, keep_volume: false };
    machines::request_operation(&env.pool, who, op).await.unwrap()
}

/// Stopped and driven to its end: shut down, GPUs back, no container.
async fn stopped(env: &engine::Env, sim: &SimulatedExecutor, who: &User, m: i64) -> i64 {
    let task = reclaim::stop(&env.pool, who, m).await.unwrap();
    env.drive().await;
    let (state, message) = task_outcome(&env.pool, task).await;
    assert_eq!(state, "succeeded", "{message}");
    let (state, message) = machine_state(&env.pool, m).await;
    assert_eq!(state, "reclaimed", "{message}");
    assert!(message.contains("shut down by its owner's stop") && message.contains("GPU(s) returned"), "{message}");
    assert!(shut_down(env, m).await);
    assert!(sim.containers().iter().all(|c| c.machine_id != m), "its container was removed");
    task
}

gantry_testkit::timed_test! {
    async fn stop_frees_the_gpus_at_once_and_start_admits_it_again() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "night-owl").await;
        assert_eq!(in_use(&env).await, 1);
        let task = stopped(&env, &sim, &alice, m).await;
        assert_eq!(in_use(&env).await, 0, "the GPUs went back with the container");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machine_gpus WHERE machine_id = {m}")).await, 0);
        env.assert_quota_consistent().await;
        // Its restore point is a reclaim snapshot (no snapshot quota), and
        // it is no reclaim notice: the owner put it away.
        let origin = env.text(&format!("SELECT s.origin FROM snapshots s JOIN machines m ON m.restore_snapshot_id = s.id WHERE m.id = {m}")).await;
        assert_eq!(origin, "reclaim");
        assert!(reclaim::notices(&env.pool, &alice).await.unwrap().is_empty());
        let view = machines::machine_detail(&env.pool, &alice, m).await.unwrap();
        assert_eq!(view.state_label(), "shut down");
        // The same stop again answers nothing new; a shut-down machine is not stopped.
        let again = reclaim::stop(&env.pool, &alice, m).await.unwrap_err().to_string();
        assert!(again.contains("is reclaimed; reclaim is not possible"), "{again}");
        let audit = env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'machine.stop'").await;
        assert_eq!(audit, 1, "task #{task}");

        let start = reclaim::start(&env.pool, &alice, m).await.unwrap();
        assert_eq!(in_use(&env).await, 1, "admitted under the quota at once");
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, start).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'machine.start'").await, 1);
        let view = machines::machine_detail(&env.pool, &alice, m).await.unwrap();
        assert_eq!(view.state_label(), "running");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn the_same_stop_asked_twice_is_one_task() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "twice").await;
        let first = reclaim::stop(&env.pool, &alice, m).await.unwrap();
        assert_eq!(reclaim::stop(&env.pool, &alice, m).await.unwrap(), first);
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, first).await.0, "succeeded");
        assert!(sim.containers().is_empty());
        assert_eq!(in_use(&env).await, 0);
    }
}

gantry_testkit::timed_test! {
    async fn the_owner_may_cancel_a_stop_not_yet_begun() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "second-thoughts").await;
        let task = reclaim::stop(&env.pool, &alice, m).await.unwrap();
        transitions::task::cancel(&env.pool, &alice, task).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "cancelled");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert_eq!(sim.containers().len(), 1, "the container is untouched");
        assert_eq!(in_use(&env).await, 1);
        let snap = env.text(&format!("SELECT state FROM snapshots WHERE machine_id = {m}")).await;
        assert_eq!(snap, "failed", "its snapshot ended with it");
    }
}

gantry_testkit::timed_test! {
    async fn start_without_room_is_refused_with_the_numbers_and_changes_nothing() {
        let env = engine::env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(gantry_platform::executor::Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "sleeper", 2)).await.unwrap().machine_id;
        env.drive().await;
        stopped(&env, &sim, &alice, m).await;
        // Meanwhile another machine takes the group's GPUs.
        let other = env.admissions.create(env.create(&alice, "busy", 2)).await.unwrap().machine_id;
        env.drive().await;
        let before = counts(&env).await;
        let err = reclaim::start(&env.pool, &alice, m).await.unwrap_err();
        assert!(matches!(err, PlatformError::Refused(_)), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("start of sleeper refused") && text.contains("holds 2 of 2 GPUs"), "{text}");
        let (machines_n, tasks_n, gpus, rows) = counts(&env).await;
        assert_eq!((machines_n, gpus, rows), (before.0, before.2, before.3), "nothing changed");
        assert_eq!(tasks_n, before.1 + 1, "the refusal is recorded as a failed task");
        assert!(shut_down(&env, m).await);

        // With the quota free but the node's GPUs taken, it says it is tied
        // to its node, with the numbers.
        sqlx::query("UPDATE groups SET gpu_quota = 4 WHERE name = 'ml-team'").execute(&env.pool).await.unwrap();
        let text = reclaim::start(&env.pool, &alice, m).await.unwrap_err().to_string();
        assert!(text.contains("live on node") && text.contains("cannot move"), "{text}");
        assert!(text.contains("has 0 free SIM-A100 GPU(s), it needs 2"), "{text}");

        // Once the other machine is gone, it starts.
        delete(&env, &alice, other).await;
        env.drive().await;
        let start = reclaim::start(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, start).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn another_users_machine_is_neither_stopped_nor_started() {
        let (env, _sim, alice) = sim_env().await;
        let m = running(&env, &alice, "mine").await;
        let bob = env.user("bob", "ml-team").await;
        let refused = reclaim::stop(&env.pool, &bob, m).await.unwrap_err().to_string();
        assert!(refused.contains("only machine mine's owner, or an admin, can stop it"), "{refused}");
        gantry_platform::accounts::create_group(&env.pool, None, "other", 4).await.unwrap();
        let carol = env.user("carol", "other").await;
        assert!(matches!(reclaim::stop(&env.pool, &carol, m).await, Err(PlatformError::NotFound(_))));
        assert!(matches!(reclaim::start(&env.pool, &carol, m).await, Err(PlatformError::NotFound(_))));

        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE kind = 'reclaim'").await, 0, "nothing queued");
    }
}

gantry_testkit::timed_test! {
    async fn a_compute_tasks_machine_is_not_stopped_even_by_an_admin() {
        let (env, _sim, root, alice) = crate::compute_sim::sim_compute_env().await;
        let job = compute_job("train", Command::Argv(vec!["sleep".into(), "600".into()]));
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        env.drive().await;
        let jm = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", t.id)).await;
        for who in [&alice, &root] {
            let refused = reclaim::stop(&env.pool, who, jm).await.unwrap_err().to_string();
            assert!(refused.contains("runs a compute task: it is not stopped"), "{refused}");
        }
        assert_eq!(env.scalar("SELECT COUNT(*) FROM tasks WHERE kind = 'reclaim'").await, 0, "nothing queued");
    }
}

gantry_testkit::timed_test! {
    async fn stop_then_delete_leaves_nothing() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "short-lived").await;
        stopped(&env, &sim, &alice, m).await;
        let snap = env.scalar(&format!("SELECT restore_snapshot_id FROM machines WHERE id = {m}")).await;
        let del = delete(&env, &alice, m).await;
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "deleted");
        // Its restore point goes like a reclaim's: row and image.
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE id = {snap}")).await, 0);
        assert!(sim.containers().is_empty(), "containers left: {:?}", sim.containers());
        assert!(sim.volume_names().is_empty(), "volumes left: {:?}", sim.volume_names());
        assert_eq!(in_use(&env).await, 0);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_stop_cut_off_midway_is_resumed_to_its_end() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "cut-off").await;
        // An idle warning is withdrawn by the stop: nothing calls it off later.
        assert!(transitions::reclaim::warn(&env.pool, m, gantry_platform::now() + 600, "idle").await.unwrap());
        let task = reclaim::stop(&env.pool, &alice, m).await.unwrap();
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM machines WHERE id = {m} AND reclaim_deadline IS NULL")).await, 1);
        // Its runner dies once the container is gone, before the GPUs go back.
        assert!(env.drive_dying_at_step("returning the GPUs").await);
        assert!(sim.containers().is_empty(), "the container was removed before the crash");
        assert_eq!(task_outcome(&env.pool, task).await.0, "running");
        assert_eq!(in_use(&env).await, 1, "the GPUs are still held meanwhile");
        env.expire_all_leases().await;
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "succeeded", "{message}");
        assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
        assert!(shut_down(&env, m).await);
        assert_eq!(in_use(&env).await, 0);
        let start = reclaim::start(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, start).await.0, "succeeded");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_stop_whose_engine_does_not_answer_is_retried_and_keeps_the_gpus_meanwhile() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "far-away").await;
        sim.set_available(false);
        let task = reclaim::stop(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        let (state, message) = task_outcome(&env.pool, task).await;
        assert_eq!(state, "scheduled", "{message}");
        assert!(message.contains("engine did not answer; retry"), "{message}");
        // Nothing was removed, so nothing was given back.
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert_eq!(in_use(&env).await, 1);
        assert_eq!(sim.containers().len(), 1);

        // The engine answers again; the retry (made due now) ends the stop.
        sim.set_available(true);
        sqlx::query("UPDATE tasks SET not_before = 0 WHERE id = ?").bind(task).execute(&env.pool).await.unwrap();
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, task).await.0, "succeeded");
        assert!(shut_down(&env, m).await);
        assert_eq!(in_use(&env).await, 0);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn start_on_a_node_that_is_down_is_refused_saying_where_its_volume_is() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "homebound").await;
        stopped(&env, &sim, &alice, m).await;
        sqlx::query("UPDATE nodes SET state = 'down'").execute(&env.pool).await.unwrap();
        let before = counts(&env).await;
        let text = reclaim::start(&env.pool, &alice, m).await.unwrap_err().to_string();
        assert!(text.contains("start of homebound refused"), "{text}");
        assert!(text.contains(" is down and takes no machines"), "{text}");
        assert!(text.contains("only run on its own node, where its volume is"), "{text}");
        assert_eq!((counts(&env).await.2, counts(&env).await.3), (before.2, before.3), "nothing changed");
        assert!(shut_down(&env, m).await);
    }
}
