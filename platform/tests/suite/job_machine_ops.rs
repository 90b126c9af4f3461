//! A compute task's machine runs its command at most once: a restart would
//! run it again in the same container, and a reinstall's new container
//! would too (the dispatcher only reports the job already started, so a
//! reinstall "succeeded" having done nothing). So neither is accepted for
//! it — an admin's request included — and the refusal says what to do.

use crate::compute_sim::sim_compute_env;
use gantry_testkit::engine;

use engine::compute_job;
use gantry_core::task::TaskKind;
use gantry_platform::{
    compute::{self, Command},
    machines::{self, OperationRequest},
    snapshots, PlatformError,
};

fn op(machine_id: i64, kind: TaskKind) -> OperationRequest {
    OperationRequest { machine_id, kind, keep_volume: false }
}

gantry_testkit::timed_test! {
    async fn a_job_machine_is_not_restarted_or_reinstalled_even_by_an_admin() {
        let (env, sim, root, alice) = sim_compute_env().await;
        let task = compute::submit(&env.pool, &env.admissions, &alice, &compute_job("train", Command::Argv(vec!["sleep".into(), "1d".into()]))).await.unwrap();
        env.drive().await;
        let job = env.scalar(&format!("SELECT COALESCE(machine_id, -1) FROM compute_tasks WHERE id = {}", task.id)).await;
        assert!(job > 0, "the job was placed");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {job}")).await, "running");
        // A dev machine's snapshot, on the job's node: what an admin might reinstall it from.
        let dev = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap().machine_id;
        env.drive().await;
        let (snap, _) = snapshots::request(&env.pool, &alice, dev, "base").await.unwrap();
        env.drive().await;
        let image = format!("SELECT image_id FROM machines WHERE id = {job}");
        let before = (env.scalar(&image).await, sim.containers().into_iter().filter(|c| c.machine_id == job).collect::<Vec<_>>());

        for kind in [TaskKind::Restart, TaskKind::Reinstall] {
            let refused = machines::request_operation(&env.pool, &root, op(job, kind)).await.unwrap_err();
            assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("at most once") && why.contains("cancel")), "{kind}: {refused}");
            // Its owner is told to cancel the task, as before.
            let refused = machines::request_operation(&env.pool, &alice, op(job, kind)).await.unwrap_err();
            assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("cancel the task")), "{kind}: {refused}");
        }
        let refused = snapshots::reinstall_from(&env.pool, &root, job, snap).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("at most once")), "{refused}");

        // Nothing was queued or changed; the job runs on.
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM tasks WHERE machine_id = {job} AND kind <> 'create'")).await, 0);
        env.drive().await;
        let after = (env.scalar(&image).await, sim.containers().into_iter().filter(|c| c.machine_id == job).collect::<Vec<_>>());
        assert_eq!(after, before);
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", task.id)).await, "running");

        // An admin may still delete it (the task ends with it).
        machines::request_operation(&env.pool, &root, op(job, TaskKind::Delete)).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {job}")).await, "deleted");
        env.assert_quota_consistent().await;
    }
}
