//! Requests that meet a world changed under them, and a compute task's
//! machine that is the task's: a compute task cancelled after the matcher
//! chose it is refused alone (not the whole admission batch with it); a
//! stale decision does not rewrite a placed task's region, nor a placement
//! the decision it follows; an account moved
//! meanwhile gets no machine from a snapshot and no compute task; a user
//! who owns snapshots is not moved; a job machine is no user's to snapshot
//! or reinstall from a snapshot.

use crate::compute_sim::sim_compute_env;
use gantry_testkit::engine;

use engine::compute_job;
use gantry_platform::{
    accounts,
    compute::{self, Command},
    machines::{self, Job, OperationRequest},
    snapshots, transitions, PlatformError,
};

fn sleeper(name: &str) -> compute::SubmitCompute {
    compute_job(name, Command::Argv(vec!["sleep".into(), "1d".into()]))
}

gantry_testkit::timed_test! {
    async fn a_compute_tasks_machine_is_not_its_submitters_to_snapshot_or_reinstall() {
        let (env, _sim, root, alice) = sim_compute_env().await;
        let task = compute::submit(&env.pool, &env.admissions, &alice, &sleeper("train")).await.unwrap();
        env.drive().await;
        let dev = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap().machine_id;
        env.drive().await;
        let (own, _) = snapshots::request(&env.pool, &alice, dev, "mine").await.unwrap();
        env.drive().await;
        let placed = env.text(&format!("SELECT state || ': ' || message FROM compute_tasks WHERE id = {}", task.id)).await;
        let job = env.scalar(&format!("SELECT COALESCE(machine_id, -1) FROM compute_tasks WHERE id = {}", task.id)).await;
        assert!(job > 0, "{placed}");
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {job}")).await, "running");

        // A snapshot would make the region image a dev machine of hers.
        let refused = snapshots::request(&env.pool, &alice, job, "escape").await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("compute task")), "{refused}");
        let refused = snapshots::reinstall_from(&env.pool, &alice, job, own).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("compute task")), "{refused}");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM snapshots WHERE machine_id = {job}")).await, 0, "nothing written");
        assert_eq!(env.scalar(&format!("SELECT COUNT(*) FROM tasks WHERE machine_id = {job} AND kind <> 'create'")).await, 0);

        // An admin may keep evidence of a job; it is no dev machine of hers.
        let (evidence, _) = snapshots::request(&env.pool, &root, job, "evidence").await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM snapshots WHERE id = {evidence}")).await, "ready");
        compute::cancel(&env.pool, &alice, task.id).await.unwrap();
        env.drive().await;
        let refused = snapshots::create_machine(&env.pool, env.create(&alice, "escape", 1), evidence).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("compute task")), "{refused}");
        let refused = snapshots::reinstall_from(&env.pool, &alice, dev, evidence).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Conflict(why) if why.contains("compute task")), "{refused}");
    }
}

gantry_testkit::timed_test! {
    async fn a_compute_task_cancelled_after_matching_is_refused_alone() {
        let (env, _sim, _root, alice) = sim_compute_env().await;
        // Waits (its group's quota is 2, it asks for 3), so the loop leaves it be.
        let mut big = sleeper("big");
        big.gpu_count = 3;
        let waiting = compute::record(&env.pool, &alice, &big).await.unwrap();
        compute::cancel(&env.pool, &alice, waiting).await.unwrap();

        // The matcher's admission for it arrives after the cancel, beside
        // an ordinary request (in its batch or the next: either way the
        // refusal is its own, and the other is admitted).
        let mut stale = env.create(&alice, "job-stale", 1);
        let region: (i64, i64) = sqlx::query_as("SELECT r.id, i.id FROM regions r JOIN region_images i ON i.region_id = r.id LIMIT 1").fetch_one(&env.pool).await.unwrap();
        let reference: String = sqlx::query_scalar("SELECT reference FROM region_images WHERE id = ?").bind(region.1).fetch_one(&env.pool).await.unwrap();
        stale.job = Some(Job { compute_task_id: waiting, region_id: region.0, region_image_id: region.1, image_reference: reference, command: vec!["true".into()], decision: "{}".into() });
        let (stale, ordinary) = tokio::join!(env.admissions.create(stale), env.admissions.create(env.create(&alice, "dev", 1)));
        let stale = stale.unwrap_err();
        assert!(matches!(&stale, PlatformError::Conflict(why) if why.contains("no longer waiting")), "{stale}");
        ordinary.unwrap();
        assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {waiting}")).await, "cancelled");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines WHERE name = 'job-stale'").await, 0, "no machine for it");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_stale_decision_leaves_a_placed_tasks_region_alone() {
        let (env, _sim, _root, alice) = sim_compute_env().await;
        let task = compute::submit(&env.pool, &env.admissions, &alice, &sleeper("train")).await.unwrap();
        let region = |id: i64| format!("SELECT COALESCE(region_id, -1) FROM compute_tasks WHERE id = {id}");
        let placed = env.scalar(&region(task.id)).await;
        assert!(placed > 0, "placed in a region");
        assert_ne!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", task.id)).await, "pending");

        // Another matcher read it as the queue's head before it was placed:
        // neither its "keep waiting" nor its rejection applies.
        let state = env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", task.id)).await;
        for outcome in [Ok("stale"), Err("no region can run it")] {
            let mut tx = transitions::begin(&env.pool).await.unwrap();
            transitions::compute::decided(&mut tx, task.id, "{}", None, outcome).await.unwrap();
            tx.commit().await.unwrap();
            assert_eq!(env.scalar(&region(task.id)).await, placed);
            assert_eq!(env.text(&format!("SELECT state FROM compute_tasks WHERE id = {}", task.id)).await, state);
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_placement_records_its_own_region_and_decision_whatever_another_pass_wrote() {
        let (env, _sim, _root, alice) = sim_compute_env().await;
        let id = compute::record(&env.pool, &alice, &sleeper("train")).await.unwrap();
        let region: (i64, i64) = sqlx::query_as("SELECT r.id, i.id FROM regions r JOIN region_images i ON i.region_id = r.id LIMIT 1").fetch_one(&env.pool).await.unwrap();
        let reference: String = sqlx::query_scalar("SELECT reference FROM region_images WHERE id = ?").bind(region.1).fetch_one(&env.pool).await.unwrap();
        // Pass A chose the region and recorded it; pass B, which read the
        // same head, then recorded "keep waiting" over it before A's
        // admission committed.
        let ours = r#"{"pass":"a"}"#;
        for (json, chosen) in [(ours, Some(region)), (r#"{"pass":"b"}"#, None)] {
            let mut tx = transitions::begin(&env.pool).await.unwrap();
            transitions::compute::decided(&mut tx, id, json, chosen, Ok("waiting")).await.unwrap();
            tx.commit().await.unwrap();
        }
        let mut placed = env.create(&alice, "job-a", 1);
        // As the matcher sizes a job machine: what the task asks.
        (placed.cpu_millis, placed.memory_mb) = (Some(500), Some(256));
        placed.job = Some(Job { compute_task_id: id, region_id: region.0, region_image_id: region.1, image_reference: reference, command: vec!["true".into()], decision: ours.into() });
        env.admissions.create(placed).await.unwrap();
        let row: (String, Option<i64>, Option<i64>, String) =
            sqlx::query_as("SELECT state, region_id, region_image_id, decision FROM compute_tasks WHERE id = ?").bind(id).fetch_one(&env.pool).await.unwrap();
        assert_eq!(row, ("scheduled".to_string(), Some(region.0), Some(region.1), ours.to_string()), "the row tells the placement that was admitted");
    }
}

gantry_testkit::timed_test! {
    async fn an_account_moved_meanwhile_gets_no_machine_from_a_snapshot_and_no_task() {
        let (env, _sim, _root, alice) = sim_compute_env().await;
        let dev = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap().machine_id;
        env.drive().await;
        let (snap, _) = snapshots::request(&env.pool, &alice, dev, "base").await.unwrap();
        env.drive().await;
        // The move commits while her requests wait for the write lock (the
        // admin's refusal rules are another test's; here the race itself).
        accounts::create_group(&env.pool, None, "vision", 2).await.unwrap();
        sqlx::query("UPDATE users SET group_id = (SELECT id FROM groups WHERE name = 'vision') WHERE id = ?").bind(alice.id).execute(&env.pool).await.unwrap();

        let refused = snapshots::create_machine(&env.pool, env.create(&alice, "copy", 1), snap).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Refused(why) if why.contains("moved to another group")), "{refused}");
        let refused = compute::record(&env.pool, &alice, &sleeper("train")).await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Refused(why) if why.contains("moved to another group")), "{refused}");
        assert_eq!(env.scalar("SELECT COUNT(*) FROM machines WHERE name = 'copy'").await, 0);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM compute_tasks").await, 0);
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn a_user_who_owns_a_snapshot_is_not_moved_to_another_group() {
        let (env, _sim, root, alice) = sim_compute_env().await;
        let dev = env.admissions.create(env.create(&alice, "dev", 1)).await.unwrap().machine_id;
        env.drive().await;
        snapshots::request(&env.pool, &alice, dev, "base").await.unwrap();
        env.drive().await;
        machines::request_operation(&env.pool, &alice, OperationRequest { machine_id: dev, kind: gantry_core::task::TaskKind::Delete, keep_volume: false }).await.unwrap();
        env.drive().await;
        assert_eq!(env.text(&format!("SELECT state FROM machines WHERE id = {dev}")).await, "deleted");
        accounts::create_group(&env.pool, None, "vision", 2).await.unwrap();

        // In vision she could neither see nor delete it; ml-team's snapshot quota would keep it.
        let refused = accounts::set_group(&env.pool, root.id, alice.id, "vision").await.unwrap_err();
        assert!(matches!(&refused, PlatformError::Refused(why) if why.contains("1 snapshot")), "{refused}");
        assert_eq!(env.scalar(&format!("SELECT group_id FROM users WHERE id = {}", alice.id)).await, alice.group_id, "nothing changed");
    }
}
