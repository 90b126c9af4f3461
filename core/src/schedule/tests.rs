use super::*;
use proptest::prelude::*;

const H: i64 = 3600;
/// 2026-01-15 18:00 UTC = 19:00 in Paris (CET, UTC+1).
const JAN15_18UTC: i64 = 1_768_500_000;
/// 2026-07-15 17:00 UTC = 19:00 in Paris (CEST, UTC+2).
const JUL15_17UTC: i64 = 1_784_134_800;
/// 2026-03-29 01:30 UTC = 03:30 CEST: Paris skips 02:00-03:00 that night.
const MAR29_0130UTC: i64 = 1_774_747_800;
/// 2026-10-25 00:30 UTC = 02:30 CEST, and 01:30 UTC = 02:30 CET again.
const OCT25_0030UTC: i64 = 1_792_888_200;

fn t(s: &str) -> DailyTime {
    s.parse().unwrap()
}

fn paris() -> TimeZone {
    zone("Europe/Paris").unwrap().0
}

#[test]
fn times_of_day_are_hh_mm_and_nothing_else() {
    assert_eq!(t("07:30"), DailyTime { hour: 7, minute: 30 });
    assert_eq!(t(" 7:05 "), DailyTime { hour: 7, minute: 5 });
    assert_eq!(t("23:59").to_string(), "23:59");
    for bad in ["24:00", "07:60", "7.30", "", "0730", "-1:00", "07:3", "ab:cd", "007:30"] {
        let err = bad.parse::<DailyTime>().unwrap_err();
        assert!(err.contains("HH:MM"), "{bad}: {err}");
    }
}

#[test]
fn zones_are_iana_names_from_the_bundled_rules() {
    assert_eq!(zone("Europe/Paris").unwrap().1, "Europe/Paris");
    assert_eq!(zone("UTC").unwrap().1, "UTC");
    for bad in ["Mars/Olympus", "", "../../etc/passwd", "CET-1CEST,M3.5.0,M10.5.0/3", "+02:00"] {
        let err = zone(bad).unwrap_err();
        assert!(err.contains("IANA"), "{bad}: {err}");
    }
}

#[test]
fn a_daily_time_falls_at_the_local_instant_in_winter_and_summer() {
    let tz = paris();
    assert_eq!(last_occurrence(t("19:00"), &tz, JAN15_18UTC - 1, JAN15_18UTC), Some(JAN15_18UTC));
    assert_eq!(last_occurrence(t("19:00"), &tz, JAN15_18UTC - H, JAN15_18UTC - 1), None);
    assert_eq!(last_occurrence(t("19:00"), &tz, JUL15_17UTC - 1, JUL15_17UTC), Some(JUL15_17UTC));
    assert_eq!(next_occurrence(t("19:00"), &tz, JUL15_17UTC), JUL15_17UTC + 24 * H);
    assert_eq!(local_time(JAN15_18UTC, &tz), "2026-01-15 19:00 CET");
    assert_eq!(local_time(JUL15_17UTC, &tz), "2026-07-15 19:00 CEST");
}

#[test]
fn a_time_skipped_by_the_spring_change_falls_just_after_the_gap_once() {
    let tz = paris();
    // 02:30 does not exist on 29 March: it runs at 03:30 CEST.
    assert_eq!(next_occurrence(t("02:30"), &tz, MAR29_0130UTC - 2 * H), MAR29_0130UTC);
    assert_eq!(last_occurrence(t("02:30"), &tz, MAR29_0130UTC - 2 * H, MAR29_0130UTC + H), Some(MAR29_0130UTC));
    assert_eq!(last_occurrence(t("02:30"), &tz, MAR29_0130UTC, MAR29_0130UTC + 20 * H), None);
}

#[test]
fn a_time_repeated_by_the_autumn_change_fires_once_at_its_first_occurrence() {
    let tz = paris();
    assert_eq!(last_occurrence(t("02:30"), &tz, OCT25_0030UTC - H, OCT25_0030UTC), Some(OCT25_0030UTC));
    // The second 02:30 (CET, an hour later) is not another occurrence.
    assert_eq!(last_occurrence(t("02:30"), &tz, OCT25_0030UTC, OCT25_0030UTC + 2 * H), None);
    // After the change, the next day's 02:30 is 25 hours after the first.
    assert_eq!(next_occurrence(t("02:30"), &tz, OCT25_0030UTC), OCT25_0030UTC + 25 * H);
}

fn running(since: i64, checked: i64) -> Standing {
    Standing { running: true, running_since: since, checked_until: checked, ..Default::default() }
}

#[test]
fn a_daily_stop_fires_once_and_only_on_a_running_machine() {
    let tz = paris();
    let s = Schedule { stop_at: Some(t("19:00")), ..Default::default() };
    let p = Policy::default();
    let due_at = |st: &Standing, now| due(&s, &tz, "Europe/Paris", &p, st, now);
    assert_eq!(due_at(&running(0, JAN15_18UTC - 60), JAN15_18UTC - 1), Due::Nothing);
    assert!(
        matches!(due_at(&running(0, JAN15_18UTC - 60), JAN15_18UTC + 5), Due::Stop { why } if why.contains("19:00 (Europe/Paris)"))
    );
    // Handled by the previous pass: not again.
    assert_eq!(due_at(&running(0, JAN15_18UTC + 5), JAN15_18UTC + 65), Due::Nothing);
    let off = Standing { running: false, shut_down: true, checked_until: JAN15_18UTC - 60, ..Default::default() };
    assert_eq!(due_at(&off, JAN15_18UTC + 5), Due::Nothing);
}

#[test]
fn a_daily_start_fires_only_on_a_shut_down_machine() {
    let tz = zone("America/New_York").unwrap().0;
    // 08:00 in New York on 15 January (EST, UTC-5) is 13:00 UTC.
    let eight = JAN15_18UTC - 5 * H;
    let s = Schedule { start_at: Some(t("08:00")), ..Default::default() };
    let off = Standing { shut_down: true, checked_until: eight - 60, ..Default::default() };
    let p = Policy::default();
    assert!(matches!(due(&s, &tz, "America/New_York", &p, &off, eight), Due::Start { .. }));
    assert_eq!(due(&s, &tz, "America/New_York", &p, &off, eight - 1), Due::Nothing);
    assert_eq!(due(&s, &tz, "America/New_York", &p, &running(0, eight - 60), eight), Due::Nothing);
}

#[test]
fn stop_after_n_hours_counts_from_the_last_start() {
    let s = Schedule { stop_after_hours: Some(3), ..Default::default() };
    let (tz, p) = (TimeZone::UTC, Policy::default());
    assert_eq!(due(&s, &tz, "UTC", &p, &running(1000, 0), 1000 + 3 * H - 1), Due::Nothing);
    assert!(
        matches!(due(&s, &tz, "UTC", &p, &running(1000, 0), 1000 + 3 * H), Due::Stop { why } if why.contains("3 h"))
    );
}

#[test]
fn the_groups_max_run_warns_first_then_stops() {
    let s = Schedule::default();
    let tz = TimeZone::UTC;
    let p = Policy { max_run_hours: 10, warn_secs: H };
    let since = 5000;
    assert_eq!(due(&s, &tz, "UTC", &p, &running(since, 0), since + 9 * H - 1), Due::Nothing);
    let Due::Warn { until, why } = due(&s, &tz, "UTC", &p, &running(since, 0), since + 9 * H) else { panic!() };
    assert_eq!(until, since + 10 * H);
    assert!(why.contains("at most 10 h"), "{why}");
    let warned = Standing { warning: Some((since + 9 * H, until)), ..running(since, 0) };
    assert_eq!(due(&s, &tz, "UTC", &p, &warned, until - 1), Due::Nothing);
    assert!(matches!(due(&s, &tz, "UTC", &p, &warned, until), Due::Stop { .. }));
    // Past the limit with no warning (the policy came later): a full window's notice.
    let late = since + 50 * H;
    assert!(matches!(due(&s, &tz, "UTC", &p, &running(since, 0), late), Due::Warn { until, .. } if until == late + H));
    // A warning of an earlier run does not count.
    let old = Standing { warning: Some((since - 10, since + 5)), ..running(since, 0) };
    assert!(matches!(due(&s, &tz, "UTC", &p, &old, since + 9 * H), Due::Warn { .. }));
}

#[test]
fn the_next_action_is_the_earliest() {
    let s = Schedule { stop_at: Some(t("19:00")), stop_after_hours: Some(2), ..Default::default() };
    let p = Policy::default();
    let at = next_action(&s, &paris(), &p, &running(JAN15_18UTC - 3 * H, 0), JAN15_18UTC - 2 * H);
    assert_eq!(at, Some((JAN15_18UTC - H, "stop after 2 h running".into())));
    assert_eq!(next_action(&Schedule::default(), &paris(), &p, &running(0, 0), 10), None);
}

#[test]
fn hours_are_whole_and_not_negative() {
    assert_eq!(parse_hours(""), Ok(None));
    assert_eq!(parse_hours("0"), Ok(None));
    assert_eq!(parse_hours("8"), Ok(Some(8)));
    assert!(parse_hours("-3").unwrap_err().contains("negative"));
    assert!(parse_hours("2.5").unwrap_err().contains("whole"));
    assert!(parse_hours("9000").unwrap_err().contains("8760"));
}

proptest! {
    /// Passes at any steps over ten days fire a daily time exactly once per
    /// occurrence, at no other instant, whatever the zone and its changes.
    #[test]
    fn passes_fire_each_occurrence_once(
        start in 1_767_225_600i64..1_798_761_600,
        steps in proptest::collection::vec(1i64..6 * H, 1..200),
        hour in 0u8..24, minute in 0u8..60,
        z in 0usize..4,
    ) {
        let names = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"];
        let tz = zone(names[z]).unwrap().0;
        let at = DailyTime { hour, minute };
        let mut checked = start;
        let mut fired = Vec::new();
        for step in steps {
            let now = checked + step;
            if let Some(i) = last_occurrence(at, &tz, checked, now) {
                fired.push(i);
            }
            checked = now;
        }
        let mut expected = Vec::new();
        let mut i = next_occurrence(at, &tz, start);
        while i <= checked {
            expected.push(i);
            i = next_occurrence(at, &tz, i);
        }
        // Steps are shorter than any day, so each occurrence is in one step.
        prop_assert_eq!(fired, expected);
    }
}
