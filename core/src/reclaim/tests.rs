use super::*;

fn settings() -> ReclaimSettings {
    ReclaimSettings {
        window_secs: 3600,
        grace_secs: 600,
        extensions_allowed: 2,
        extension_secs: 1800,
        ..ReclaimSettings::default()
    }
}

/// One sample every `step` seconds from `from` to `to`, at `pct`.
fn series(from: i64, to: i64, step: usize, pct: f64) -> Vec<UtilSample> {
    (from..=to).step_by(step).map(|at| UtilSample { at, util_pct: pct }).collect()
}

const NOW: i64 = 100_000;

#[test]
fn idle_for_the_window_is_warned_with_the_grace_deadline() {
    let s = settings();
    let samples = series(NOW - 3600, NOW, 10, 1.0);
    let d = decide(&samples, &s, &Standing::default(), NOW);
    assert_eq!(d, Decision::Warn { until: NOW + 600, peak_pct: 1.0 });
}

#[test]
fn one_busy_sample_keeps_it() {
    let s = settings();
    let mut samples = series(NOW - 3600, NOW, 10, 0.0);
    samples[100].util_pct = 5.1;
    assert_eq!(decide(&samples, &s, &Standing::default(), NOW), Decision::Ok);
    let warned = Standing { deadline: Some(NOW - 1), ..Standing::default() };
    assert!(matches!(decide(&samples, &s, &warned, NOW), Decision::Clear { reason } if reason.contains("5 %")));
}

#[test]
fn at_the_threshold_counts_as_idle() {
    let samples = series(NOW - 3600, NOW, 10, 5.0);
    assert!(matches!(decide(&samples, &settings(), &Standing::default(), NOW), Decision::Warn { .. }));
}

#[test]
fn too_few_samples_or_too_recent_a_start_is_not_evidence() {
    let s = settings();
    // Only the last half hour watched.
    let samples = series(NOW - 1800, NOW, 10, 0.0);
    assert_eq!(decide(&samples, &s, &Standing::default(), NOW), Decision::Ok);
    // A 20-minute hole in the middle (the sampler stopped).
    let mut holed = series(NOW - 3600, NOW - 2400, 10, 0.0);
    holed.extend(series(NOW - 1200, NOW, 10, 0.0));
    assert_eq!(decide(&holed, &s, &Standing::default(), NOW), Decision::Ok);
    // Restored ten minutes ago: older samples belong to its previous life.
    let full = series(NOW - 3600, NOW, 10, 0.0);
    assert_eq!(decide(&full, &s, &Standing { active_since: NOW - 600, ..Standing::default() }, NOW), Decision::Ok);
    assert_eq!(decide(&[], &s, &Standing::default(), NOW), Decision::Ok);
}

#[test]
fn reclaimed_only_after_the_deadline() {
    let s = settings();
    let samples = series(NOW - 3600, NOW, 10, 0.0);
    let before = Standing { deadline: Some(NOW + 1), ..Standing::default() };
    assert_eq!(decide(&samples, &s, &before, NOW), Decision::Ok);
    let after = Standing { deadline: Some(NOW), ..Standing::default() };
    assert_eq!(decide(&samples, &s, &after, NOW), Decision::Reclaim { peak_pct: 0.0 });
}

#[test]
fn exempt_or_disabled_is_never_warned_and_loses_its_warning() {
    let samples = series(NOW - 3600, NOW, 10, 0.0);
    let exempt = Standing { exempt: true, ..Standing::default() };
    assert_eq!(decide(&samples, &settings(), &exempt, NOW), Decision::Ok);
    let warned = Standing { exempt: true, deadline: Some(NOW - 5), ..Standing::default() };
    assert!(matches!(decide(&samples, &settings(), &warned, NOW), Decision::Clear { .. }));
    let off = ReclaimSettings { enabled: false, ..settings() };
    assert_eq!(decide(&samples, &off, &Standing::default(), NOW), Decision::Ok);
}

#[test]
fn extensions_are_limited_and_push_from_the_later_of_deadline_and_now() {
    let s = settings();
    assert!(extend(&s, &Standing::default(), NOW).unwrap_err().contains("no reclaim warning"));
    let warned = Standing { deadline: Some(NOW + 100), ..Standing::default() };
    assert_eq!(extend(&s, &warned, NOW), Ok(NOW + 100 + 1800));
    let late = Standing { deadline: Some(NOW - 100), extensions_used: 1, ..Standing::default() };
    assert_eq!(extend(&s, &late, NOW), Ok(NOW + 1800));
    let used = Standing { deadline: Some(NOW), extensions_used: 2, ..Standing::default() };
    assert!(extend(&s, &used, NOW).unwrap_err().contains("used 2 of 2"));
}

#[test]
fn settings_are_checked() {
    assert!(ReclaimSettings::default().check().is_ok());
    assert!(ReclaimSettings { threshold_pct: 101.0, ..settings() }.check().unwrap_err().contains("threshold"));
    assert!(ReclaimSettings { threshold_pct: f64::NAN, ..settings() }.check().is_err());
    assert!(ReclaimSettings { window_secs: 10, ..settings() }.check().unwrap_err().contains("window"));
    assert!(ReclaimSettings { grace_secs: -1, ..settings() }.check().unwrap_err().contains("grace"));
}

#[test]
fn time_left_reads_well() {
    assert_eq!(format_left(3725), "1 h 02 min");
    assert_eq!(format_left(250), "4 min 10 s");
    assert_eq!(format_left(12), "12 s");
    assert_eq!(format_left(-5), "0 s");
}

#[test]
fn every_gpu_must_show_idleness_on_its_own() {
    let s = settings();
    let now = 10_000;
    let idle = series(now - s.window_secs, now, 10, 1.0);
    let standing = Standing { active_since: 0, ..Standing::default() };
    // Two idle GPUs: warned.
    assert!(matches!(decide_gpus(&[&idle, &idle], &s, &standing, now), Decision::Warn { .. }));
    // One GPU unread (NVML could not read it: no samples): not evidence.
    assert_eq!(decide_gpus(&[&idle, &[]], &s, &standing, now), Decision::Ok);
    // One GPU with a gap: not evidence either.
    let gappy: Vec<UtilSample> =
        idle.iter().copied().filter(|x| x.at < now - s.window_secs / 2 || x.at > now - s.window_secs / 4).collect();
    assert_eq!(decide_gpus(&[&idle, &gappy], &s, &standing, now), Decision::Ok);
    // No GPUs at all: nothing to decide.
    assert_eq!(decide_gpus(&[], &s, &standing, now), Decision::Ok);
}

#[test]
fn a_failed_reclaim_waits_the_grace_period_doubling_per_failure() {
    let s = settings(); // grace 600 s
    assert_eq!(retry_delay(&s, 1), 600);
    assert_eq!(retry_delay(&s, 2), 1200);
    assert_eq!(retry_delay(&s, 3), 2400);
    assert_eq!(retry_delay(&s, 0), 600, "0 is read as the first");
    assert_eq!(retry_delay(&s, 40), RETRY_MAX_SECS, "capped");
    // No grace period still waits: a failing reclaim is not retried at every pass.
    let none = ReclaimSettings { grace_secs: 0, ..settings() };
    assert_eq!(retry_delay(&none, 1), RETRY_MIN_SECS);
    let long = ReclaimSettings { grace_secs: 7 * 86_400, ..settings() };
    assert_eq!(retry_delay(&long, 1), RETRY_MAX_SECS);
}
