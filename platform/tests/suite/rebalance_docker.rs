//! Hot-GPU rebalancing on one node of the real local Docker Engine: two
//! machines run hot side by side; the hotter one moves to the coolest free
//! GPU (new container pinned to it, same volume), the other to the next;
//! an opted-out machine stays, and the event says why with the numbers.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_platform::reclaim;
use reclaim_common::*;

async fn gpu_ids(env: &engine::Env) -> Vec<i64> {
    sqlx::query_scalar("SELECT id FROM gpus WHERE node_id = ? ORDER BY idx")
        .bind(env.node_id)
        .fetch_all(&env.pool)
        .await
        .unwrap()
}

async fn held(env: &engine::Env, machine: i64) -> Vec<i64> {
    sqlx::query_scalar("SELECT gpu_id FROM machine_gpus WHERE machine_id = ? ORDER BY gpu_id")
        .bind(machine)
        .fetch_all(&env.pool)
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    async fn hot_machine_moves_to_the_coolest_gpu_on_its_node_with_its_volume() {
        let env = engine::docker_env(4, 4).await;
        let alice = env.user("alice", "ml-team").await;
        let root = admin(&env.pool).await;
        short_settings(&env.pool, &root, 1800, 1).await;
        let ex = env.executor().await;
        let a = env.admissions.create(env.create(&alice, "hot-a", 1)).await.unwrap();
        let b = env.admissions.create(env.create(&alice, "hot-b", 1)).await.unwrap();
        env.drive().await;
        let gpus = gpu_ids(&env).await;
        let (ga, gb) = (held(&env, a.machine_id).await[0], held(&env, b.machine_id).await[0]);
        let free: Vec<i64> = gpus.iter().copied().filter(|g| *g != ga && *g != gb).collect();
        let ca = env.text(&format!("SELECT container_id FROM machines WHERE id = {}", a.machine_id)).await;
        ex.exec(&ca, &["sh", "-c", "echo still-here > /data/x.txt"]).await.unwrap();

        let t0 = gantry_platform::now() + 5;
        steady(&env.pool, ga, env.node_id, Some(a.machine_id), t0, t0 + 60, 99.0, 91.0).await;
        steady(&env.pool, gb, env.node_id, Some(b.machine_id), t0, t0 + 60, 97.0, 88.0).await;
        steady(&env.pool, free[0], env.node_id, None, t0, t0 + 60, 0.0, 50.0).await;
        steady(&env.pool, free[1], env.node_id, None, t0, t0 + 60, 0.0, 40.0).await;

        // hot-b is opted out by its owner: only hot-a moves.
        reclaim::set_rebalance_opt_out(&env.pool, &alice, b.machine_id, true).await.unwrap();
        let r = reclaim::pass(&env.pool, t0 + 60).await.unwrap();
        assert_eq!(r.moves_queued, vec![a.machine_id]);
        env.drive().await;
        let kind_state = env.text(&format!("SELECT kind || ' ' || state FROM tasks WHERE machine_id = {} ORDER BY id DESC LIMIT 1", a.machine_id)).await;
        assert_eq!(kind_state, "rebalance succeeded");
        assert_eq!(held(&env, a.machine_id).await, vec![free[1]], "moved to the coolest free GPU");
        assert_eq!(held(&env, b.machine_id).await, vec![gb], "the opted-out machine stays");
        assert_eq!(machine_state(&env.pool, a.machine_id).await.0, "running");
        let new = env.text(&format!("SELECT container_id FROM machines WHERE id = {}", a.machine_id)).await;
        assert_ne!(new, ca, "a new container");
        let uuid = env.text(&format!("SELECT uuid FROM gpus WHERE id = {}", free[1])).await;
        let (_, out) = ex.exec(&new, &["sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES; cat /data/x.txt"]).await.unwrap();
        assert_eq!(out, format!("{uuid}\nstill-here\n"), "pinned to the new GPU, same volume");
        let ev = events(&env.pool, a.machine_id).await;
        let (kind, why) = ev.last().unwrap();
        assert_eq!(kind, "rebalanced");
        assert!(why.contains("99 % utilisation") && why.contains("91 °C") && why.contains("also hot") && why.contains("(40 °C)"), "{why}");
        env.assert_quota_consistent().await;
        assert_eq!(env.scalar("SELECT gpus_in_use FROM groups WHERE name = 'ml-team'").await, 2, "a move changes no quota");

        // Opted in again with no cooler GPU left: refused, the reason recorded once.
        reclaim::set_rebalance_opt_out(&env.pool, &alice, b.machine_id, false).await.unwrap();
        let t1 = t0 + 120;
        steady(&env.pool, gb, env.node_id, Some(b.machine_id), t1 - 60, t1, 97.0, 30.0).await;
        steady(&env.pool, free[1], env.node_id, Some(a.machine_id), t1 - 60, t1, 99.0, 31.0).await;
        steady(&env.pool, free[0], env.node_id, None, t1 - 60, t1, 0.0, 50.0).await;
        steady(&env.pool, ga, env.node_id, None, t1 - 60, t1, 0.0, 45.0).await;
        let r = reclaim::pass(&env.pool, t1).await.unwrap();
        assert!(r.moves_queued.is_empty(), "{r:?}");
        assert_eq!(r.moves_refused.len(), 2, "{r:?}");
        let (kind, why) = events(&env.pool, b.machine_id).await.last().cloned().unwrap();
        assert_eq!(kind, "rebalance_refused");
        assert!(why.contains("cooler than 30 °C, 1 needed") && why.contains("another node"), "{why}");
        assert!(reclaim::pass(&env.pool, t1).await.unwrap().moves_refused.is_empty(), "recorded once");

        for m in [a.machine_id, b.machine_id] {
            gantry_platform::machines::request_operation(
                &env.pool,
                &alice,
                gantry_platform::machines::OperationRequest { machine_id: m, kind: gantry_core::task::TaskKind::Delete, keep_volume: false },
            )
            .await
            .unwrap();
        }
        env.drive().await;
        env.assert_quota_consistent().await;
    }
}
