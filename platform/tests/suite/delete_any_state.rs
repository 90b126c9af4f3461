//! A delete is accepted in every state but `deleted` (issue 33, item 1): a
//! create not yet begun is cancelled in the delete's commit; one under way
//! stops at its next step boundary and the delete follows; a create
//! waiting out a retry meets the delete at once; the same delete twice is
//! one task. Each ends with the machine deleted, its GPUs back and nothing
//! left on the engine. A compute task cancelled while its machine is being
//! made stops there too, and a restart may wait for a snapshot.

use crate::reclaim_common::{machine_state, task_outcome};
use gantry_testkit::engine;

use engine::{compute_job, env, Env};
use gantry_core::task::TaskKind;
use gantry_platform::{
    accounts::User,
    compute::{self, Command},
    dispatch,
    executor::{ExecError, Executor, SimulatedExecutor},
    machines::{self, OperationRequest},
    snapshots,
};

async fn sim_env() -> (Env, SimulatedExecutor, User) {
    let env = env("simulated", 2, 2).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    let alice = env.user("alice", "ml-team").await;
    (env, sim, alice)
}

async fn delete(env: &Env, who: &User, machine_id: i64) -> i64 {
    let op = OperationRequest { machine_id, kind: TaskKind::Delete, keep_volume: false };
    machines::request_operation(&env.pool, who, op).await.unwrap()
}

/// Deleted, GPUs back, nothing left on the engine.
async fn assert_gone(env: &Env, sim: &SimulatedExecutor, machine_id: i64) {
    assert_eq!(machine_state(&env.pool, machine_id).await.0, "deleted");
    assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
    assert!(sim.containers().is_empty(), "containers left: {:?}", sim.containers());
    assert!(sim.volume_names().is_empty(), "volumes left: {:?}", sim.volume_names());
    env.assert_quota_consistent().await;
}

gantry_testkit::timed_test! {
    async fn a_delete_right_after_create_closes_the_machine_at_once() {
        let (env, sim, alice) = sim_env().await;
        let m = env.admissions.create(env.create(&alice, "oops", 1)).await.unwrap().machine_id;
        assert_eq!(machine_state(&env.pool, m).await.0, "creating");
        let create = env.scalar(&format!("SELECT id FROM tasks WHERE machine_id = {m} AND kind = 'create'")).await;

        // Nothing was made on the node yet: the create is cancelled in the
        // delete's own commit, and that task is the answer.
        assert_eq!(delete(&env, &alice, m).await, create);
        assert_eq!(task_outcome(&env.pool, create).await.0, "cancelled");
        assert_gone(&env, &sim, m).await;
        assert_eq!(env.drive().await, 0, "nothing left to run");
        assert!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'machine.delete'").await >= 1);
    }
}

gantry_testkit::timed_test! {
    async fn a_create_under_way_stops_at_its_next_step_for_the_delete() {
        let (env, sim, alice) = sim_env().await;
        let m = env.admissions.create(env.create(&alice, "half", 1)).await.unwrap().machine_id;
        // A dispatcher has claimed the create (it is running) when the delete comes.
        let claimed = dispatch::claim(&env.pool, &env.dispatcher.owner, 16).await.unwrap();
        assert_eq!(claimed.len(), 1);
        let del = delete(&env, &alice, m).await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "scheduled", "queued behind the create");
        assert_eq!(delete(&env, &alice, m).await, del, "the same delete twice is one task");

        env.dispatcher.execute(claimed.into_iter().next().unwrap()).await;
        let (state, message) = task_outcome(&env.pool, claimed_create(&env, m).await).await;
        assert_eq!(state, "failed");
        assert_eq!(message, format!("stopped for the machine's delete (task #{del}), asked for meanwhile"));
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");
        assert_gone(&env, &sim, m).await;
    }
}

async fn claimed_create(env: &Env, machine_id: i64) -> i64 {
    env.scalar(&format!("SELECT id FROM tasks WHERE machine_id = {machine_id} AND kind = 'create'")).await
}

gantry_testkit::timed_test! {
    async fn a_create_waiting_to_retry_meets_the_delete_at_once() {
        let (env, sim, alice) = sim_env().await;
        let m = env.admissions.create(env.create(&alice, "retrying", 1)).await.unwrap().machine_id;
        // Volume and container made, the start waits out a backoff.
        sim.fail_next("start_container", ExecError::Unavailable("engine restarting".into()));
        env.drive().await;
        let create = claimed_create(&env, m).await;
        assert_eq!(task_outcome(&env.pool, create).await.0, "scheduled");
        assert_eq!(sim.containers().len(), 1);

        let del = delete(&env, &alice, m).await;
        // No waiting for the backoff: the create is due now, stops, and
        // what it made goes with the delete.
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, create).await.0, "failed");
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");
        assert_gone(&env, &sim, m).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_restart_under_way_gives_way_to_a_delete() {
        let (env, sim, alice) = sim_env().await;
        let m = env.admissions.create(env.create(&alice, "box", 2)).await.unwrap().machine_id;
        env.drive().await;
        let op = OperationRequest { machine_id: m, kind: TaskKind::Restart, keep_volume: false };
        let restart = machines::request_operation(&env.pool, &alice, op).await.unwrap();
        let claimed = dispatch::claim(&env.pool, &env.dispatcher.owner, 16).await.unwrap();
        let del = delete(&env, &alice, m).await;
        for task in claimed {
            env.dispatcher.execute(task).await;
        }
        assert_eq!(task_outcome(&env.pool, restart).await.0, "failed");
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");
        assert_gone(&env, &sim, m).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_restart_waits_for_a_snapshot_but_not_for_nothing() {
        let (env, _sim, alice) = sim_env().await;
        let m = env.admissions.create(env.create(&alice, "box", 1)).await.unwrap().machine_id;
        env.drive().await;
        let (_, snap_task) = snapshots::request(&env.pool, &alice, m, "before-restart").await.unwrap();
        let op = OperationRequest { machine_id: m, kind: TaskKind::Restart, keep_volume: false };
        let restart = machines::request_operation(&env.pool, &alice, op.clone()).await.unwrap();
        // A second restart waits for nothing: the machine is busy with the first.
        let busy = machines::request_operation(&env.pool, &alice, op).await.unwrap_err();
        assert_eq!(busy.to_string(), "machine box is busy with another operation; wait for it to finish");
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, snap_task).await.0, "succeeded");
        assert_eq!(task_outcome(&env.pool, restart).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        let order: Vec<i64> = sqlx::query_scalar("SELECT id FROM tasks WHERE machine_id = ? AND kind IN ('snapshot', 'restart') ORDER BY updated_at, id")
            .bind(m).fetch_all(&env.pool).await.unwrap();
        assert_eq!(order, vec![snap_task, restart], "the restart ran after the snapshot");
    }
}

gantry_testkit::timed_test! {
    async fn a_job_cancelled_while_its_machine_is_being_made_stops_there() {
        let (env, sim, _root, alice) = crate::compute_sim::sim_compute_env().await;
        let t = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["true".into()]))).await.unwrap();
        // Its machine's create is under way when the cancel comes.
        let claimed = dispatch::claim(&env.pool, &env.dispatcher.owner, 16).await.unwrap();
        assert_eq!(claimed.len(), 1);
        compute::cancel(&env.pool, &alice, t.id).await.unwrap();
        env.dispatcher.execute(claimed.into_iter().next().unwrap()).await;
        env.drive().await;

        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "cancelled");
        let machine = env.scalar(&format!("SELECT machine_id FROM compute_tasks WHERE id = {}", t.id)).await;
        assert_gone(&env, &sim, machine).await;
    }
}

gantry_testkit::timed_test! {
    async fn on_docker_a_create_cut_off_midway_then_deleted_leaves_nothing() {
        let env = engine::docker_env(2, 2).await;
        let alice = env.user("alice", "ml-team").await;
        let m = env.admissions.create(env.create(&alice, "cut-off", 1)).await.unwrap().machine_id;
        // Its runner dies with the volume and the container made, before
        // the start: the create stays `running` under a lease nobody renews.
        assert!(env.drive_dying_at_step("starting the container").await);
        let exec = env.executor().await;
        let instance = machines::instance_id(&env.pool).await.unwrap();
        assert_eq!(exec.list_managed(&instance).await.unwrap().len(), 1, "the container was made");

        let del = delete(&env, &alice, m).await;
        assert_eq!(task_outcome(&env.pool, del).await.0, "scheduled");
        // The next process resumes the create, which stops for the delete.
        env.expire_all_leases().await;
        env.drive().await;
        assert_eq!(task_outcome(&env.pool, claimed_create(&env, m).await).await.0, "failed");
        assert_eq!(task_outcome(&env.pool, del).await.0, "succeeded");
        assert_eq!(machine_state(&env.pool, m).await.0, "deleted");
        assert!(exec.list_managed(&instance).await.unwrap().is_empty(), "a container was left on the engine");
        assert!(exec.list_managed_volumes(&instance).await.unwrap().is_empty(), "a volume was left on the engine");
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 0);
        env.assert_quota_consistent().await;
    }
}
