//! The idle and hot windows read raw GPU samples only: a window longer than
//! the samples are kept (`GANTRY_TELEMETRY_RAW_HOURS`) could never be
//! covered, and reclaim or rebalancing would be on and never act. Saving
//! one is refused with the numbers and changes nothing; a restart that
//! shortens the retention below the saved windows is flagged.

use crate::reclaim_common;
use gantry_testkit::engine;

use gantry_core::{rebalance::HotSettings, reclaim::ReclaimSettings};
use gantry_platform::{
    reclaim::{self, Settings},
    PlatformError,
};
use reclaim_common::admin;

fn with_windows(idle: i64, hot: i64) -> Settings {
    Settings {
        reclaim: ReclaimSettings { window_secs: idle, ..ReclaimSettings::default() },
        hot: HotSettings { window_secs: hot, ..HotSettings::default() },
    }
}

gantry_testkit::timed_test! {
    async fn a_window_longer_than_the_raw_samples_kept_is_refused_and_changes_nothing() {
        let env = engine::env("simulated", 1, 1).await;
        let root = admin(&env.pool).await;
        assert!(reclaim::note_raw_retention(&env.pool, 3 * 3600).await.unwrap().is_empty(), "the defaults (2 h, 10 min) fit in 3 h");
        let before = reclaim::load_settings(&env.pool).await.unwrap();
        let audits = env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'reclaim.settings'").await;

        for (idle, hot, named) in [(4 * 3600, 600, "the idle window (4 h 00 min)"), (3600, 3 * 3600 + 60, "the hot window (3 h 01 min)")] {
            match reclaim::save_settings(&env.pool, &root, &with_windows(idle, hot)).await {
                Err(PlatformError::BadRequest(why)) => {
                    assert!(why.contains(named) && why.contains("raw GPU samples are kept (3 h 00 min"), "{why}");
                    assert!(why.contains("GANTRY_TELEMETRY_RAW_HOURS"), "{why}");
                }
                other => panic!("a {idle} s / {hot} s window saved with 3 h of samples: {other:?}"),
            }
        }
        assert_eq!(reclaim::load_settings(&env.pool).await.unwrap(), before);
        assert_eq!(env.scalar("SELECT COUNT(*) FROM audit_log WHERE action = 'reclaim.settings'").await, audits);

        // Exactly the retention is fine.
        reclaim::save_settings(&env.pool, &root, &with_windows(3 * 3600, 3 * 3600)).await.unwrap();
        assert_eq!(reclaim::load_settings(&env.pool).await.unwrap().reclaim.window_secs, 3 * 3600);
    }
}

gantry_testkit::timed_test! {
    async fn a_restart_keeping_fewer_samples_than_the_saved_windows_says_so() {
        let env = engine::env("simulated", 1, 1).await;
        let root = admin(&env.pool).await;
        reclaim::note_raw_retention(&env.pool, 24 * 3600).await.unwrap();
        reclaim::save_settings(&env.pool, &root, &with_windows(12 * 3600, 600)).await.unwrap();

        let why = reclaim::note_raw_retention(&env.pool, 6 * 3600).await.unwrap();
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].starts_with("the idle window (12 h 00 min) is longer than raw GPU samples are kept (6 h 00 min"), "{}", why[0]);
        assert_eq!(reclaim::raw_retention_secs(&env.pool).await.unwrap(), 6 * 3600);
        // The admin's values stay as saved: only the admin changes them.
        assert_eq!(reclaim::load_settings(&env.pool).await.unwrap().reclaim.window_secs, 12 * 3600);
    }
}
