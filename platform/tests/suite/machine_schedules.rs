//! Schedules (issue 35, part 1) under an injected clock, on the simulated
//! engine: a daily stop and start in the owner's time zone (Paris, not
//! UTC), a stop after N hours running, the group's longest run (warning,
//! then stop), a scheduled start with no room waiting in the line; bad
//! input refused with a clear message and nothing changed. `pass` is given
//! the instant; every action goes through the same stop and start.

use crate::reclaim_common::{admin, machine_state};
use crate::reclaim_snapshots::{running, sim_env};
use gantry_core::schedule::{next_occurrence, zone, DailyTime};
use gantry_platform::{
    accounts::{self, User},
    executor::{Executor, SimulatedExecutor},
    now, reclaim,
    schedules::{self, ScheduleChange},
    PlatformError,
};
use gantry_testkit::engine;

const H: i64 = 3600;

fn change(stop: &str, start: &str, hours: Option<i64>) -> ScheduleChange {
    ScheduleChange { stop_at: Some(stop.into()), start_at: Some(start.into()), stop_after_hours: hours }
}

async fn audits(env: &engine::Env, action: &str) -> i64 {
    env.scalar(&format!("SELECT COUNT(*) FROM audit_log WHERE action = '{action}'")).await
}

/// The pass at `at` queued a stop of `m`; driven, the machine is shut down.
async fn stops_at(env: &engine::Env, m: i64, at: i64) {
    let report = schedules::pass(&env.pool, at).await.unwrap();
    assert_eq!(report.stopped, vec![m], "{report:?}");
    env.drive().await;
    assert_eq!(machine_state(&env.pool, m).await.0, "reclaimed");
}

gantry_testkit::timed_test! {
    async fn a_daily_stop_and_start_fire_at_the_owners_local_time() {
        let (env, _sim, alice) = sim_env().await;
        let m = running(&env, &alice, "office-hours").await;
        assert_eq!(schedules::set_time_zone(&env.pool, &alice, "Europe/Paris").await.unwrap(), "Europe/Paris");
        let view = schedules::set(&env.pool, &alice, m, change("19:00", "08:00", None)).await.unwrap();
        assert_eq!((view.stop_at.as_deref(), view.start_at.as_deref()), (Some("19:00"), Some("08:00")));
        assert_eq!(view.time_zone, "Europe/Paris");
        let paris = zone("Europe/Paris").unwrap().0;
        let at = |hh: u8, after: i64| next_occurrence(DailyTime { hour: hh, minute: 0 }, &paris, after);
        let stop_at = at(19, now());
        // 19:00 in Paris is never 19:00 UTC: the owner's zone is the one used.
        assert_ne!(stop_at.rem_euclid(86400), 19 * H);
        let next = view.next.unwrap();
        assert_eq!((next.at, next.what.as_str()), (stop_at, "daily stop"));
        assert!(next.local.contains(" 19:00 CE"), "{}", next.local);
        assert_eq!(audits(&env, "machine.schedule").await, 1);

        assert_eq!(schedules::pass(&env.pool, stop_at - 1).await.unwrap(), Default::default());
        stops_at(&env, m, stop_at).await;
        assert_eq!(audits(&env, "machine.stopped").await, 1);
        // Fired once: the next pass does not stop (or start) it again.
        assert_eq!(schedules::pass(&env.pool, stop_at + 60).await.unwrap(), Default::default());
        let start_at = at(8, stop_at);
        assert_eq!(schedules::pass(&env.pool, start_at - 1).await.unwrap(), Default::default());
        let report = schedules::pass(&env.pool, start_at).await.unwrap();
        assert_eq!(report.started, vec![m], "{report:?}");
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "running");
        env.assert_quota_consistent().await;
    }
}

gantry_testkit::timed_test! {
    async fn stop_after_n_hours_counts_from_the_start() {
        let (env, _sim, alice) = sim_env().await;
        let before = now();
        let m = running(&env, &alice, "bounded").await;
        let after = now();
        let no_times = ScheduleChange { stop_after_hours: Some(3), ..Default::default() };
        assert_eq!(schedules::set(&env.pool, &alice, m, no_times).await.unwrap().stop_after_hours, Some(3));
        assert_eq!(schedules::pass(&env.pool, before + 3 * H - 1).await.unwrap(), Default::default());
        stops_at(&env, m, after + 3 * H).await;
    }
}

gantry_testkit::timed_test! {
    async fn the_groups_longest_run_warns_first_then_stops() {
        let (env, _sim, alice) = sim_env().await;
        let before = now();
        let m = running(&env, &alice, "marathon").await;
        let after = now();
        let root = admin(&env.pool).await;
        let group = alice.group_id;
        assert_eq!(schedules::set_group_max_run(&env.pool, &root, group, 10).await.unwrap(), 10);
        assert_eq!(audits(&env, "group.update").await, 1);
        let window = reclaim::load_settings(&env.pool).await.unwrap().reclaim.grace_secs;
        assert_eq!(schedules::pass(&env.pool, before + 10 * H - window - 1).await.unwrap(), Default::default());
        let warn_at = after + 10 * H - window;
        let report = schedules::pass(&env.pool, warn_at).await.unwrap();
        assert_eq!((report.warned, report.stopped), (vec![m], vec![]));
        assert_eq!(audits(&env, "machine.max_run_warn").await, 1);
        let until = env.scalar(&format!("SELECT until FROM machine_run_warnings WHERE machine_id = {m}")).await;
        assert!(until >= warn_at + window - (after - before) && until <= warn_at + window, "{until}");
        let told = env.scalar(&format!("SELECT COUNT(*) FROM notifications WHERE user_id = {} AND kind = 'max_run_warning'", alice.id)).await;
        assert_eq!(told, 1, "its owner is told with the warning");
        // Warned once; not stopped before the warning's end.
        assert_eq!(schedules::pass(&env.pool, until - 1).await.unwrap(), Default::default());
        stops_at(&env, m, until).await;
        assert_eq!(schedules::get(&env.pool, &alice, m).await.unwrap().max_run_hours, 10);
    }
}

gantry_testkit::timed_test! {
    async fn a_scheduled_start_with_no_room_waits_and_begins_when_room_appears() {
        let env = engine::env("simulated", 1, 1).await;
        env.use_executor(Executor::from(SimulatedExecutor::new()));
        let alice = env.user("alice", "ml-team").await;
        let m = running(&env, &alice, "early-bird").await;
        reclaim::stop(&env.pool, &alice, m).await.unwrap();
        env.drive().await;
        let hog = running(&env, &alice, "hog").await;
        let at = next_occurrence(DailyTime { hour: 7, minute: 30 }, &zone("UTC").unwrap().0, now());
        let start_only = ScheduleChange { start_at: Some("07:30".into()), ..Default::default() };
        schedules::set(&env.pool, &alice, m, start_only).await.unwrap();
        let report = schedules::pass(&env.pool, at).await.unwrap();
        assert_eq!(report.queued, vec![m], "{report:?}");
        let view = schedules::get(&env.pool, &alice, m).await.unwrap();
        assert_eq!(view.queued.unwrap().text, "1st in line in group ml-team");
        reclaim::stop(&env.pool, &alice, hog).await.unwrap();
        env.drive().await;
        assert_eq!(machine_state(&env.pool, m).await.0, "running", "it began when the hog stopped");
        env.assert_quota_consistent().await;
    }
}

/// What a refused change must leave as it was.
async fn snapshot_of(env: &engine::Env, who: &User) -> (i64, i64, String) {
    let rows = env.scalar("SELECT COUNT(*) FROM machine_schedules").await;
    let audit = env
        .scalar(
            "SELECT COUNT(*) FROM audit_log WHERE action IN ('machine.schedule', 'group.update', 'account.time_zone')",
        )
        .await;
    (rows, audit, schedules::time_zone(&env.pool, who.id).await.unwrap())
}

gantry_testkit::timed_test! {
    async fn bad_input_is_refused_clearly_and_changes_nothing() {
        let (env, _sim, alice) = sim_env().await;
        let m = running(&env, &alice, "careful").await;
        schedules::set(&env.pool, &alice, m, change("18:00", "", None)).await.unwrap();
        let before = snapshot_of(&env, &alice).await;
        let cases: [(ScheduleChange, &str); 4] = [
            (change("25:00", "", None), "daily stop time: '25:00' is not a time of day"),
            (change("", "7h30", None), "daily start time: '7h30' is not a time of day"),
            (change("", "", Some(-3)), "hours must not be negative (got -3)"),
            (change("", "", Some(10_000)), "at most 8760 hours"),
        ];
        for (bad, says) in cases {
            let err = schedules::set(&env.pool, &alice, m, bad).await.unwrap_err();
            assert!(matches!(err, PlatformError::BadRequest(_)) && err.to_string().contains(says), "{err}");
        }
        let err = schedules::set_time_zone(&env.pool, &alice, "Mars/Olympus").await.unwrap_err().to_string();
        assert!(err.contains("'Mars/Olympus' is not a time zone"), "{err}");
        // Someone else's machine: not theirs in the group, invisible outside it.
        let bob = env.user("bob", "ml-team").await;
        let err = schedules::set(&env.pool, &bob, m, change("", "", None)).await.unwrap_err().to_string();
        assert!(err.contains("only machine careful's owner, or an admin, can change its schedule"), "{err}");
        accounts::create_group(&env.pool, None, "other", 4).await.unwrap();
        let carol = env.user("carol", "other").await;
        let err = schedules::set(&env.pool, &carol, m, change("", "", None)).await.unwrap_err();
        assert!(matches!(err, PlatformError::NotFound(_)), "{err}");
        // A group's longest run: admins only, never negative.
        let root = admin(&env.pool).await;
        let err = schedules::set_group_max_run(&env.pool, &root, alice.group_id, -1).await.unwrap_err().to_string();
        assert!(err.contains("must not be negative"), "{err}");
        let err = schedules::set_group_max_run(&env.pool, &alice, alice.group_id, 5).await.unwrap_err().to_string();
        assert!(err.contains("only an admin"), "{err}");
        assert_eq!(snapshot_of(&env, &alice).await, before, "nothing changed");
        let view = schedules::get(&env.pool, &alice, m).await.unwrap();
        assert_eq!((view.stop_at.as_deref(), view.start_at, view.max_run_hours), (Some("18:00"), None, 0));
    }
}
