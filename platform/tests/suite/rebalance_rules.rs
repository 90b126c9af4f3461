//! Hot-GPU rebalancing's rules on the simulated engine (fast, no Docker):
//! an idle pair of machines whose GPUs are full of memory (as TensorFlow
//! leaves them) is not moved, and a machine that was just moved is not
//! moved again until the cooldown has passed, whatever its GPUs read. An
//! owner who opts out stops a move that has not touched the machine yet.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_core::rebalance::MOVE_COOLDOWN_SECS;
use gantry_platform::{
    dispatch,
    executor::{Executor, SimulatedExecutor},
    reclaim,
    telemetry::{self, GpuSample},
};
use reclaim_common::*;

async fn gpus(env: &engine::Env) -> Vec<i64> {
    sqlx::query_scalar("SELECT id FROM gpus WHERE node_id = ? ORDER BY idx")
        .bind(env.node_id)
        .fetch_all(&env.pool)
        .await
        .unwrap()
}

async fn gpu_of(env: &engine::Env, machine: i64) -> i64 {
    env.scalar(&format!("SELECT gpu_id FROM machine_gpus WHERE machine_id = {machine}")).await
}

/// Every 10 s from `from` to `to`: `util` % busy, `mem_used_mb` of 81920 MB.
async fn series(
    env: &engine::Env,
    gpu_id: i64,
    machine: Option<i64>,
    from: i64,
    to: i64,
    util: f64,
    mem_used_mb: i64,
    temp: f64,
) {
    let samples: Vec<GpuSample> = (from..=to)
        .step_by(10)
        .map(|at| GpuSample {
            gpu_id,
            at_ms: at * 1000,
            node_id: env.node_id,
            machine_id: machine,
            util_pct: util,
            mem_used_mb,
            mem_total_mb: 81920,
            temp_c: temp,
            power_w: 60.0,
            throttled: false,
        })
        .collect();
    telemetry::insert_samples(&env.pool, &samples).await.unwrap();
}

/// A simulated 4-GPU node with short rebalance settings.
async fn sim_env() -> (engine::Env, SimulatedExecutor) {
    let env = engine::env("simulated", 4, 4).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    let root = admin(&env.pool).await;
    short_settings(&env.pool, &root, 1800, 1).await;
    (env, sim)
}

/// Two running one-GPU machines of alice's, their GPUs and the free ones.
struct Pair {
    alice: gantry_platform::accounts::User,
    a: i64,
    b: i64,
    ga: i64,
    gb: i64,
    free: Vec<i64>,
}

async fn two_running(env: &engine::Env) -> Pair {
    let alice = env.user("alice", "ml-team").await;
    let a = env.admissions.create(env.create(&alice, "hot-a", 1)).await.unwrap().machine_id;
    let b = env.admissions.create(env.create(&alice, "hot-b", 1)).await.unwrap().machine_id;
    env.drive().await;
    let (ga, gb) = (gpu_of(env, a).await, gpu_of(env, b).await);
    let free = gpus(env).await.into_iter().filter(|g| *g != ga && *g != gb).collect();
    Pair { alice, a, b, ga, gb, free }
}

/// The minute before `t0`: both machines' GPUs hot and busy, the free ones
/// cool and idle.
async fn both_hot(env: &engine::Env, p: &Pair, t0: i64) {
    series(env, p.ga, Some(p.a), t0 - 60, t0, 99.0, 2000, 80.0).await;
    series(env, p.gb, Some(p.b), t0 - 60, t0, 97.0, 2000, 80.0).await;
    for g in &p.free {
        series(env, *g, None, t0 - 60, t0, 0.0, 0, 30.0).await;
    }
}

async fn rebalance_tasks(env: &engine::Env) -> i64 {
    env.scalar("SELECT COUNT(*) FROM tasks WHERE kind = 'rebalance'").await
}

gantry_testkit::timed_test! {
    async fn an_idle_pair_with_full_gpu_memory_is_not_moved() {
        let env = engine::env("simulated", 4, 4).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 1800, 1).await;
        let a = env.admissions.create(env.create(&alice, "tf-a", 1)).await.unwrap().machine_id;
        let b = env.admissions.create(env.create(&alice, "tf-b", 1)).await.unwrap().machine_id;
        env.drive().await;
        let (ga, gb) = (gpu_of(&env, a).await, gpu_of(&env, b).await);
        let free: Vec<i64> = gpus(&env).await.into_iter().filter(|g| *g != ga && *g != gb).collect();

        // 99 % of memory taken, nothing computed; cooler free GPUs wait.
        let t0 = gantry_platform::now() + 5;
        series(&env, ga, Some(a), t0, t0 + 60, 0.0, 81100, 45.0).await;
        series(&env, gb, Some(b), t0, t0 + 60, 0.0, 81100, 45.0).await;
        for g in &free {
            series(&env, *g, None, t0, t0 + 60, 0.0, 0, 30.0).await;
        }
        let r = reclaim::pass(&env.pool, t0 + 60).await.unwrap();
        assert!(r.moves_queued.is_empty() && r.moves_refused.is_empty(), "{r:?}");
        assert_eq!(rebalance_tasks(&env).await, 0);
        assert_eq!((gpu_of(&env, a).await, gpu_of(&env, b).await), (ga, gb));
    }
}

gantry_testkit::timed_test! {
    async fn a_moved_machine_is_not_moved_again_within_the_cooldown() {
        let env = engine::env("simulated", 4, 4).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 1800, 1).await;
        let a = env.admissions.create(env.create(&alice, "hot-a", 1)).await.unwrap().machine_id;
        let b = env.admissions.create(env.create(&alice, "hot-b", 1)).await.unwrap().machine_id;
        env.drive().await;
        // b stays put throughout (opted out); its hot GPU is a's contention.
        reclaim::set_rebalance_opt_out(&env.pool, &alice, b, true).await.unwrap();
        let (ga, gb) = (gpu_of(&env, a).await, gpu_of(&env, b).await);
        let free: Vec<i64> = gpus(&env).await.into_iter().filter(|g| *g != ga && *g != gb).collect();
        // Both of a's GPUs, old and new, run hot while it holds them;
        // whichever is free is cool.
        let hot_node = |at: i64| {
            let env = &env;
            let free = free.clone();
            async move {
                let now_on = gpu_of(env, a).await;
                series(env, now_on, Some(a), at - 60, at, 99.0, 2000, 80.0).await;
                series(env, gb, Some(b), at - 60, at, 97.0, 2000, 80.0).await;
                for g in [ga].iter().chain(&free).filter(|g| **g != now_on) {
                    series(env, *g, None, at - 60, at, 0.0, 0, 30.0).await;
                }
            }
        };

        let t0 = gantry_platform::now() + 65;
        hot_node(t0).await;
        assert_eq!(reclaim::pass(&env.pool, t0).await.unwrap().moves_queued, vec![a]);
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE machine_id = {a} AND kind = 'rebalance'")).await, "succeeded");
        let moved_to = gpu_of(&env, a).await;
        assert_ne!(moved_to, ga);

        // Hot again two minutes later, cooler GPUs free: refused, with why.
        let t1 = t0 + 120;
        hot_node(t1).await;
        let r = reclaim::pass(&env.pool, t1).await.unwrap();
        assert!(r.moves_queued.is_empty(), "{r:?}");
        assert_eq!(r.moves_refused, vec![a]);
        let (kind, why) = events(&env.pool, a).await.pop().unwrap();
        assert_eq!(kind, "rebalance_refused");
        assert!(why.contains("not moved again within 6 h"), "{why}");
        assert_eq!((gpu_of(&env, a).await, rebalance_tasks(&env).await), (moved_to, 1));

        // Past the cooldown it may move again.
        let t2 = t0 + MOVE_COOLDOWN_SECS + 120;
        hot_node(t2).await;
        assert_eq!(reclaim::pass(&env.pool, t2).await.unwrap().moves_queued, vec![a]);
    }
}

gantry_testkit::timed_test! {
    async fn opting_out_stops_a_queued_move_and_one_a_runner_claimed_before_it_starts() {
        let env = engine::env("simulated", 4, 4).await;
        let sim = SimulatedExecutor::new();
        env.use_executor(Executor::from(sim.clone()));
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 1800, 1).await;
        let a = env.admissions.create(env.create(&alice, "hot-a", 1)).await.unwrap().machine_id;
        let b = env.admissions.create(env.create(&alice, "hot-b", 1)).await.unwrap().machine_id;
        env.drive().await;
        reclaim::set_rebalance_opt_out(&env.pool, &alice, b, true).await.unwrap();
        let (ga, gb) = (gpu_of(&env, a).await, gpu_of(&env, b).await);
        let free: Vec<i64> = gpus(&env).await.into_iter().filter(|g| *g != ga && *g != gb).collect();
        let hot_node = |at: i64| {
            let (env, free) = (&env, free.clone());
            async move {
                series(env, ga, Some(a), at - 60, at, 99.0, 2000, 80.0).await;
                series(env, gb, Some(b), at - 60, at, 97.0, 2000, 80.0).await;
                for g in &free {
                    series(env, *g, None, at - 60, at, 0.0, 0, 30.0).await;
                }
            }
        };
        let container = env.text(&format!("SELECT container_id FROM machines WHERE id = {a}")).await;
        let stays_put = |why: &'static str| {
            let (env, container) = (&env, container.clone());
            async move {
                assert_eq!(gpu_of(env, a).await, ga, "{why}: the GPUs");
                assert_eq!(env.text(&format!("SELECT state || ' ' || container_id FROM machines WHERE id = {a}")).await, format!("running {container}"), "{why}");
                let (kind, detail) = events(&env.pool, a).await.pop().unwrap();
                assert_eq!(kind, "rebalance_refused", "{why}: {detail}");
                assert!(detail.contains("its owner opted out"), "{why}: {detail}");
            }
        };

        // Queued, not claimed: the opt-out cancels it in the same commit.
        let t0 = gantry_platform::now() + 65;
        hot_node(t0).await;
        assert_eq!(reclaim::pass(&env.pool, t0).await.unwrap().moves_queued, vec![a]);
        let cancelled = reclaim::set_rebalance_opt_out(&env.pool, &alice, a, true).await.unwrap();
        assert!(cancelled.is_some());
        assert_eq!(env.text(&format!("SELECT state FROM tasks WHERE id = {}", cancelled.unwrap())).await, "cancelled");
        env.drive().await;
        stays_put("a queued move").await;

        // Opted in again, queued again and claimed by a runner; the owner
        // opts out before it starts: the runner stops it, container untouched.
        reclaim::set_rebalance_opt_out(&env.pool, &alice, a, false).await.unwrap();
        let t1 = t0 + 120;
        hot_node(t1).await;
        assert_eq!(reclaim::pass(&env.pool, t1).await.unwrap().moves_queued, vec![a]);
        let mut runner = env.dispatcher.clone();
        runner.owner = dispatch::new_owner_id();
        let claimed = dispatch::claim(&env.pool, &runner.owner, 16).await.unwrap();
        assert_eq!(claimed.len(), 1);
        let task = claimed[0].id;
        assert_eq!(reclaim::set_rebalance_opt_out(&env.pool, &alice, a, true).await.unwrap(), None, "a claimed move is left to its runner");
        for c in claimed {
            runner.execute(c).await;
        }
        let (state, message) = (env.text(&format!("SELECT state FROM tasks WHERE id = {task}")).await, env.text(&format!("SELECT message FROM tasks WHERE id = {task}")).await);
        assert_eq!(state, "succeeded", "{message}");
        assert!(message.starts_with("not moved: its owner opted out"), "{message}");
        stays_put("a claimed move").await;
        assert_eq!(sim.containers().len(), 2, "no container was removed or made");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_gpu_left_to_the_collector_is_no_target_for_a_move() {
        let (env, _sim) = sim_env().await;
        let p = two_running(&env).await;
        // The free GPUs look cool and idle, but a deleted machine's container
        // (its engine did not answer the delete) may still hold them.
        for g in &p.free {
            sqlx::query("INSERT INTO gpus_left_to_collector (gpu_id, machine_id, since) VALUES (?, 999, 0)").bind(g).execute(&env.pool).await.unwrap();
        }
        let t0 = gantry_platform::now() + 65;
        both_hot(&env, &p, t0).await;
        let r = reclaim::pass(&env.pool, t0).await.unwrap();
        assert!(r.moves_queued.is_empty(), "{r:?}");
        assert_eq!(rebalance_tasks(&env).await, 0);

        // Once the collector has let them go, they are targets again.
        sqlx::query("DELETE FROM gpus_left_to_collector").execute(&env.pool).await.unwrap();
        assert!(!reclaim::pass(&env.pool, t0).await.unwrap().moves_queued.is_empty());
    }
}

gantry_testkit::timed_test! {
    async fn a_move_resumed_after_its_new_container_was_recorded_is_not_made_again() {
        let (env, sim) = sim_env().await;
        let p = two_running(&env).await;
        let (a, ga) = (p.a, p.ga);
        reclaim::set_rebalance_opt_out(&env.pool, &p.alice, p.b, true).await.unwrap();
        let t0 = gantry_platform::now() + 65;
        both_hot(&env, &p, t0).await;
        assert_eq!(reclaim::pass(&env.pool, t0).await.unwrap().moves_queued, vec![a]);
        // The runner records the new container's state, then stops.
        assert!(env.drive_dying_at_step("observed").await);
        let moved_to = gpu_of(&env, a).await;
        assert_ne!(moved_to, ga);
        let containers: Vec<String> = sim.containers().into_iter().filter(|c| c.machine_id == a).map(|c| c.id).collect();
        env.expire_all_leases().await;
        env.drive().await;
        let (state, why): (String, String) = sqlx::query_as(&format!("SELECT state, message FROM tasks WHERE machine_id = {a} AND kind = 'rebalance'")).fetch_one(&env.pool).await.unwrap();
        assert_eq!(state, "succeeded", "{why}");
        assert!(!why.contains("not moved"), "it was moved: {why}");
        assert_eq!(gpu_of(&env, a).await, moved_to);
        let after: Vec<String> = sim.containers().into_iter().filter(|c| c.machine_id == a).map(|c| c.id).collect();
        assert_eq!(after, containers, "the container made on the new GPU is kept, not made again");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_machine_is_not_moved_before_it_has_held_its_gpu_for_the_whole_window() {
        let (env, _sim) = sim_env().await;
        let p = two_running(&env).await;
        let started = env.scalar(&format!("SELECT MAX(updated_at) FROM tasks WHERE kind = 'create' AND machine_id IN ({}, {})", p.a, p.b)).await;
        let hot_between = |from: i64, to: i64| {
            let (env, p) = (&env, &p);
            async move {
                series(env, p.ga, Some(p.a), from, to, 99.0, 2000, 80.0).await;
                series(env, p.gb, Some(p.b), from, to, 97.0, 2000, 80.0).await;
                for g in &p.free {
                    series(env, *g, None, from, to, 0.0, 0, 30.0).await;
                }
            }
        };

        // 45 s into a 60 s window, hot at every sample since they started:
        // the first sample is within a quarter window of the window's start,
        // but neither machine has held its GPU for the whole window.
        hot_between(started, started + 45).await;
        let r = reclaim::pass(&env.pool, started + 45).await.unwrap();
        assert!(r.moves_queued.is_empty() && r.moves_refused.is_empty(), "{r:?}");
        assert_eq!(rebalance_tasks(&env).await, 0);

        // Once they have held them for a whole window they are moved, and
        // the reason gives the span the samples cover (the window here).
        hot_between(started + 50, started + 70).await;
        let r = reclaim::pass(&env.pool, started + 70).await.unwrap();
        assert_eq!(r.moves_queued, vec![p.a, p.b]);
        let why = env.text(&format!("SELECT json_extract(payload, '$.why') FROM tasks WHERE machine_id = {} AND kind = 'rebalance'", p.a)).await;
        assert!(why.contains(" ran hot for 1 min 00 s (mean 99 % utilisation"), "{why}");
    }
}
