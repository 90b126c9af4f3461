//! What the reclaim, rebalance and snapshot tests share: short settings,
//! sampled series at injected times, and reading a machine's row.

use gantry_core::{rebalance::HotSettings, reclaim::ReclaimSettings};
use gantry_platform::{
    accounts::User,
    db::Pool,
    reclaim::{self, Settings},
    telemetry::{self, GpuSample},
};

/// One-minute windows, so a test's injected clock runs a few minutes ahead.
pub async fn short_settings(pool: &Pool, admin: &User, grace_secs: i64, extensions_allowed: u32) {
    let s = Settings {
        reclaim: ReclaimSettings {
            enabled: true,
            threshold_pct: 5.0,
            window_secs: 60,
            grace_secs,
            extensions_allowed,
            extension_secs: 60,
        },
        hot: HotSettings { enabled: true, util_pct: 90.0, mem_pct: 95.0, temp_c: 85.0, window_secs: 60 },
    };
    reclaim::save_settings(pool, admin, &s).await.unwrap();
}

/// The telemetry sampler run every 10 s from `from` to `to` (unix s): the
/// simulated source follows each machine's `sim_pattern`.
pub async fn sample_every_10s(pool: &Pool, from: i64, to: i64) {
    for at in (from..=to).step_by(10) {
        telemetry::sample_once(pool, at * 1000).await.unwrap();
    }
}

/// A steady series for one GPU (attributed to `machine`), every 10 s.
pub async fn steady(
    pool: &Pool,
    gpu_id: i64,
    node_id: i64,
    machine: Option<i64>,
    from: i64,
    to: i64,
    util: f64,
    temp: f64,
) {
    let samples: Vec<GpuSample> = (from..=to)
        .step_by(10)
        .map(|at| GpuSample {
            gpu_id,
            at_ms: at * 1000,
            node_id,
            machine_id: machine,
            util_pct: util,
            mem_used_mb: 1000,
            mem_total_mb: 81920,
            temp_c: temp,
            power_w: 100.0,
            throttled: false,
        })
        .collect();
    telemetry::insert_samples(pool, &samples).await.unwrap();
}

pub async fn machine_state(pool: &Pool, id: i64) -> (String, String) {
    sqlx::query_as("SELECT state, message FROM machines WHERE id = ?").bind(id).fetch_one(pool).await.unwrap()
}

pub async fn task_outcome(pool: &Pool, id: i64) -> (String, String) {
    sqlx::query_as("SELECT state, message FROM tasks WHERE id = ?").bind(id).fetch_one(pool).await.unwrap()
}

pub async fn events(pool: &Pool, machine: i64) -> Vec<(String, String)> {
    sqlx::query_as("SELECT kind, detail FROM machine_events WHERE machine_id = ? ORDER BY id")
        .bind(machine)
        .fetch_all(pool)
        .await
        .unwrap()
}

pub async fn admin(pool: &Pool) -> User {
    gantry_platform::accounts::create_user(
        pool,
        None,
        gantry_platform::accounts::NewUser {
            username: "root-admin",
            password: "password-123",
            role: gantry_core::Role::Admin,
            group: None,
        },
    )
    .await
    .unwrap()
}

/// A running machine of alice's on the simulated engine, warned and its
/// reclaim queued, then run by a process that dies once the container is
/// gone, before the GPUs go back: (env, engine, alice, machine, task),
/// the task left `running` under the dead runner's lease.
pub async fn reclaim_died_after_removing_the_container(
) -> (gantry_testkit::engine::Env, gantry_platform::executor::SimulatedExecutor, User, i64, i64) {
    use gantry_platform::{
        dispatch,
        executor::{Executor, SimulatedExecutor},
        now, transitions,
    };
    let env = gantry_testkit::engine::env("simulated", 2, 2).await;
    let sim = SimulatedExecutor::new();
    env.use_executor(Executor::from(sim.clone()));
    let alice = env.user("alice", "ml-team").await;
    let m = env.admissions.create(env.create(&alice, "sleepy", 1)).await.unwrap().machine_id;
    env.drive().await;
    let t = now();
    assert!(transitions::reclaim::warn(&env.pool, m, t - 1, "idle").await.unwrap());
    let task = transitions::reclaim::queue(&env.pool, m, t, None, "idle reclaim").await.unwrap().expect("queued");
    let mut dying = env.dispatcher.clone();
    dying.owner = dispatch::new_owner_id();
    dying.hook = Some(std::sync::Arc::new(|_, step| step == "returning the GPUs"));
    for claimed in dispatch::claim(&env.pool, &dying.owner, 16).await.unwrap() {
        dying.execute(claimed).await;
    }
    assert!(sim.containers().is_empty(), "the container was removed before the crash");
    assert_eq!(task_outcome(&env.pool, task).await.0, "running");
    (env, sim, alice, m, task)
}
