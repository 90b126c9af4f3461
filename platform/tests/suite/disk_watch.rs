//! A machine's own filesystem (issue 33, item 8) on the simulated engine:
//! the disk watcher warns the owner near the group's limit and stops a
//! machine over it, saying why; a compute task over it ends failed with
//! that reason; an engine away or a container gone changes nothing.

use crate::{
    compute_sim::sim_compute_env,
    reclaim_common::{events, machine_state},
    reclaim_snapshots::{running, sim_env},
};
use gantry_core::disk::MB;
use gantry_platform::{
    compute::{self, Command},
    disk,
    executor::{ContainerStatus, SimulatedExecutor},
    policy::update_group_policy_with_disk,
    policy_access::AccessChange,
    policy_disk::DiskLimits,
};
use gantry_testkit::engine::{compute_job, Env};

/// Sets group ml-team's writable-layer limit per machine, in MB.
pub(crate) async fn set_root_limit(env: &Env, mb: i64) {
    let g = env.scalar("SELECT id FROM groups WHERE name = 'ml-team'").await;
    let quota = env.scalar("SELECT gpu_quota FROM groups WHERE name = 'ml-team'").await;
    let disk = DiskLimits { root_disk_mb: Some(mb), snapshot_disk_mb: None };
    update_group_policy_with_disk(&env.pool, None, g, quota, 4, &[], &AccessChange::default(), None, None, &disk, None)
        .await
        .unwrap();
}

fn container_of(sim: &SimulatedExecutor, machine: i64) -> String {
    sim.containers().into_iter().find(|c| c.machine_id == machine).expect("its container").id
}

fn kinds(list: &[(String, String)]) -> Vec<&str> {
    list.iter().map(|(k, _)| k.as_str()).collect()
}

gantry_testkit::timed_test! {
    async fn a_machine_near_its_limit_is_warned_once_and_over_it_is_stopped_saying_why() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "filler").await;
        set_root_limit(&env, 20).await;
        let c = container_of(&sim, m);

        sim.set_root_disk_bytes(&c, 10 * MB);
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!((r.warned.len(), r.stopped.len()), (0, 0), "{r:?}");
        assert_eq!(env.scalar(&format!("SELECT root_disk_bytes FROM machines WHERE id = {m}")).await, 10 * MB, "the reading is kept");

        sim.set_root_disk_bytes(&c, 19 * MB);
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(r.warned.len(), 1, "{r:?}");
        disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        let seen = events(&env.pool, m).await;
        assert_eq!(kinds(&seen), ["disk_warning"], "warned once, not every pass");
        assert!(seen[0].1.contains("19.0 MB of its 20 MB limit"), "{}", seen[0].1);
        assert_eq!(machine_state(&env.pool, m).await.0, "running", "a warning stops nothing");

        sim.set_root_disk_bytes(&c, 30 * MB);
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(r.stopped.len(), 1, "{r:?}");
        let why = "stopped: its filesystem outside /data used 30.0 MB of its 20 MB limit";
        assert_eq!(machine_state(&env.pool, m).await, ("stopped".to_string(), why.to_string()));
        assert!(matches!(sim.containers()[0].status, ContainerStatus::Exited { .. }), "the container was stopped");
        assert_eq!(kinds(&events(&env.pool, m).await), ["disk_warning", "disk_stopped"]);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'machine.disk_stopped'").await, 1);
        // The reconciler finds it as the watcher left it.
        gantry_platform::reconcile::reconcile_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(machine_state(&env.pool, m).await.1, why);
    }
}

gantry_testkit::timed_test! {
    async fn no_limit_an_engine_away_or_a_container_gone_changes_nothing() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "filler").await;
        let c = container_of(&sim, m);
        sim.set_root_disk_bytes(&c, 2_000_000 * MB);

        // 0: no limit.
        set_root_limit(&env, 0).await;
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(r, disk::Report::default());

        // Away: the node is skipped with why, nothing written.
        set_root_limit(&env, 20).await;
        sim.set_available(false);
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!((r.stopped.len(), r.skipped.len()), (0, 1), "{r:?}");
        assert!(r.skipped[0].contains("unreachable"), "{r:?}");
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert!(events(&env.pool, m).await.is_empty());
        sim.set_available(true);

        // Gone: the reconciler's to notice, not the watcher's.
        sim.remove_container(&c).await.unwrap();
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(r, disk::Report::default());
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        assert!(events(&env.pool, m).await.is_empty());
    }
}

gantry_testkit::timed_test! {
    async fn a_compute_task_over_its_limit_ends_failed_with_the_reason() {
        let (env, sim, _root, alice) = sim_compute_env().await;
        set_root_limit(&env, 20).await;
        let job = compute_job("filler", Command::Argv(vec!["sleep".into(), "3600".into()]));
        let t = compute::submit(&env.pool, &env.admissions, &alice, &job).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", t.id)).await, "running");
        let c = sim.containers().pop().unwrap().id;
        sim.set_root_disk_bytes(&c, 25 * MB);

        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!(r.stopped.len(), 1, "{r:?}");
        assert_eq!(compute::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap(), 1, "its end is recorded");
        env.drive().await;
        let (state, message, code): (String, String, i64) =
            sqlx::query_as("SELECT state, message, exit_code FROM compute_tasks WHERE id = ?").bind(t.id).fetch_one(&env.pool).await.unwrap();
        assert_eq!(state, "failed");
        assert_eq!(message, "stopped: its filesystem outside /data used 25.0 MB of its 20 MB limit");
        assert_ne!(code, 0, "the simulated stop exits 0; a disk stop is a failure");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_container_gone_between_the_reading_and_the_stop_or_a_deleted_machine_changes_nothing() {
        let (env, sim, alice) = sim_env().await;
        let m = running(&env, &alice, "filler").await;
        set_root_limit(&env, 20).await;
        let c = container_of(&sim, m);
        sim.set_root_disk_bytes(&c, 30 * MB);

        // Removed (a delete elsewhere) after it was measured, before the stop.
        sim.fail_next("stop_container", gantry_platform::executor::ExecError::NotFound(format!("no such container {c}")));
        let r = disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap();
        assert_eq!((r.stopped.len(), r.skipped.len()), (0, 0), "{r:?}");
        assert_eq!(machine_state(&env.pool, m).await.0, "running", "the reconciler's to notice");
        assert!(events(&env.pool, m).await.is_empty());

        // Deleted: no longer watched.
        let request = gantry_platform::machines::OperationRequest {
            machine_id: m,
            kind: gantry_core::task::TaskKind::Delete,
            keep_volume: false,
        };
        gantry_platform::machines::request_operation(&env.pool, &alice, request).await.unwrap();
        assert_eq!(disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap(), disk::Report::default(), "an operation is open");
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "deleted");
        assert_eq!(disk::watch_once(&env.pool, &env.dispatcher.fleet).await.unwrap(), disk::Report::default());
        assert!(events(&env.pool, m).await.is_empty());
    }
}
