//! A delete or create that gives up on an unreachable engine refunds the
//! quota at once, but the container pinned to the machine's GPUs may
//! still run there: those GPUs are offered to nobody until the collector
//! has seen the engine without that container.

use gantry_testkit::engine;

use engine::{env, Env};
use gantry_core::task::TaskKind;
use gantry_platform::{
    executor::{ExecError, SimulatedExecutor},
    machines::{self, OperationRequest},
    reconcile, transitions, PlatformError,
};
use std::collections::HashSet;

/// A one-GPU node driven by `sim`, alice in ml-team (quota 2).
async fn one_gpu_env() -> (Env, SimulatedExecutor, gantry_platform::accounts::User) {
    let env = env("simulated", 1, 2).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(sim.clone().into());
    let alice = env.user("alice", "ml-team").await;
    (env, sim, alice)
}

/// Runs `task` once more as its last attempt, with the engine not answering.
async fn give_up_unreachable(env: &Env, sim: &SimulatedExecutor, task: i64) {
    sim.set_available(false);
    sqlx::query("UPDATE tasks SET attempts = 5, not_before = 0 WHERE id = ?")
        .bind(task)
        .execute(&env.pool)
        .await
        .unwrap();
    env.drive().await;
    sim.set_available(true);
}

/// Machine `first` ran on the only GPU; its delete gave up on the engine.
async fn delete_given_up(env: &Env, sim: &SimulatedExecutor, alice: &gantry_platform::accounts::User) -> i64 {
    let first = env.admissions.create(env.create(alice, "first", 1)).await.unwrap();
    env.drive().await;
    let op = OperationRequest { machine_id: first.machine_id, kind: TaskKind::Delete, keep_volume: false };
    let del = machines::request_operation(&env.pool, alice, op).await.unwrap();
    give_up_unreachable(env, sim, del).await;
    assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", first.machine_id)).await, "deleted");
    assert_eq!(
        env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await,
        0,
        "the quota is refunded at once"
    );
    first.machine_id
}

fn assert_no_gpu_pinned_twice(sim: &SimulatedExecutor) {
    let mut seen = HashSet::new();
    for c in sim.containers() {
        for g in c.gpu_uuids {
            assert!(seen.insert(g.clone()), "GPU {g} pinned by two containers");
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_gpu_is_not_handed_out_while_a_given_up_deletes_container_still_holds_it() {
        let (env, sim, alice) = one_gpu_env().await;
        delete_given_up(&env, &sim, &alice).await;
        // The engine answers again; the collector has not run yet.
        let second = env.admissions.create(env.create(&alice, "second", 1)).await;
        env.drive().await;
        assert_no_gpu_pinned_twice(&sim);
        assert!(matches!(second, Err(PlatformError::Refused(_))), "{second:?}");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_gpu_is_not_handed_out_while_a_given_up_creates_container_may_remain() {
        let (env, sim, alice) = one_gpu_env().await;
        // The container is made, then the engine stops answering for good.
        sim.fail_next("start_container", ExecError::Unavailable("the engine went away".into()));
        let first = env.admissions.create(env.create(&alice, "first", 1)).await.unwrap();
        env.drive().await;
        assert_eq!(sim.containers().len(), 1);
        give_up_unreachable(&env, &sim, first.task_id).await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", first.machine_id)).await, "failed");
        let second = env.admissions.create(env.create(&alice, "second", 1)).await;
        env.drive().await;
        assert_no_gpu_pinned_twice(&sim);
        assert!(matches!(second, Err(PlatformError::Refused(_))), "{second:?}");
    }
}

gantry_testkit::timed_test! {
    async fn the_gpu_is_offered_again_once_the_collector_removed_the_container() {
        let (env, sim, alice) = one_gpu_env().await;
        let first = delete_given_up(&env, &sim, &alice).await;
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(report.containers_collected.len(), 1, "{report:?}");
        assert!(sim.containers().iter().all(|c| c.machine_id != first));
        let second = env.admissions.create(env.create(&alice, "second", 1)).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {}", second.machine_id)).await, "running");
        assert_eq!(sim.containers().len(), 1);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_pass_that_cannot_remove_the_container_keeps_the_gpu_out_of_reach() {
        let (env, sim, alice) = one_gpu_env().await;
        delete_given_up(&env, &sim, &alice).await;
        sim.fail_next("remove_container", ExecError::Failed("device or resource busy".into()));
        let report = reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(report.not_collected.len(), 1, "{report:?}");
        assert!(env.admissions.create(env.create(&alice, "second", 1)).await.is_err(), "the old container still holds the GPU");
        // The next pass removes it, and the GPU is free again.
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert!(sim.containers().is_empty());
        env.admissions.create(env.create(&alice, "second", 1)).await.unwrap();
    }
}

gantry_testkit::timed_test! {
    async fn a_gpu_is_not_handed_out_while_a_given_up_restores_container_may_remain() {
        let (env, sim, alice) = one_gpu_env().await;
        let first = env.admissions.create(env.create(&alice, "first", 1)).await.unwrap().machine_id;
        env.drive().await;
        let t = gantry_platform::now();
        assert!(transitions::reclaim::warn(&env.pool, first, t - 1, "idle").await.unwrap());
        transitions::reclaim::queue(&env.pool, first, t, None, "idle reclaim").await.unwrap().expect("queued");
        env.drive().await;
        // The restore's container is made, then the engine stops answering.
        sim.fail_next("start_container", ExecError::Unavailable("the engine went away".into()));
        let restore = transitions::reclaim::restore(&env.pool, &alice, first).await.unwrap();
        env.drive().await;
        give_up_unreachable(&env, &sim, restore).await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {first}")).await, "reclaimed");
        let second = env.admissions.create(env.create(&alice, "second", 1)).await;
        env.drive().await;
        assert_no_gpu_pinned_twice(&sim);
        assert!(matches!(second, Err(PlatformError::Refused(_))), "{second:?}");
    }
}

gantry_testkit::timed_test! {
    async fn a_machine_restored_since_does_not_keep_the_gpus_it_left() {
        let env = env("simulated", 2, 2).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(sim.clone().into());
        let alice = env.user("alice", "ml-team").await;
        let first = env.admissions.create(env.create(&alice, "first", 1)).await.unwrap().machine_id;
        env.drive().await;
        let t = gantry_platform::now();
        assert!(transitions::reclaim::warn(&env.pool, first, t - 1, "idle").await.unwrap());
        transitions::reclaim::queue(&env.pool, first, t, None, "idle reclaim").await.unwrap().expect("queued");
        env.drive().await;
        sim.fail_next("start_container", ExecError::Unavailable("the engine went away".into()));
        let restore = transitions::reclaim::restore(&env.pool, &alice, first).await.unwrap();
        env.drive().await;
        give_up_unreachable(&env, &sim, restore).await;
        // Restored again on the other GPU: its new container replaced the old one.
        transitions::reclaim::restore(&env.pool, &alice, first).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {first}")).await, "running");
        assert!(env.admissions.create(env.create(&alice, "second", 1)).await.is_err(), "the left GPU waits for the collector");
        reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(sim.containers().len(), 1, "the restored machine's container stays");
        env.admissions.create(env.create(&alice, "second", 1)).await.unwrap();
        env.drive().await;
        assert_no_gpu_pinned_twice(&sim);
    }
}

gantry_testkit::timed_test! {
    async fn the_regions_page_does_not_count_a_gpu_left_to_the_collector_as_free() {
        let (env, sim, alice) = one_gpu_env().await;
        delete_given_up(&env, &sim, &alice).await;
        let nodes = gantry_platform::cluster::list_nodes(&env.pool).await.unwrap();
        assert_eq!(nodes[0].gpu_free, 0, "the Nodes page says so");
        let regions = gantry_platform::catalogue::region_resources(&env.pool).await.unwrap();
        let gpus: Vec<_> = regions.into_iter().flat_map(|r| r.gpus).collect();
        assert_eq!(gpus.iter().map(|g| (g.total, g.free)).collect::<Vec<_>>(), vec![(1, 0)], "there, but not free: {gpus:?}");
    }
}
